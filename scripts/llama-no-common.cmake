# Included by scripts/setup.sh's llama.cpp build right after llama.cpp's project() call
# (CMAKE_PROJECT_llama.cpp_INCLUDE). llama-cpp-python's CMakeLists.txt forces the cache
# variable LLAMA_BUILD_COMMON on, but its Python package never loads libllama-common: this
# normal variable shadows the cache entry in llama.cpp's scope, so common/ and cpp-httplib
# are not compiled (2.5 instead of 8.5 minutes on 2 cores; same libllama and libggml).
set(LLAMA_BUILD_COMMON OFF)
