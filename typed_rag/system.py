"""TypedRAG: the request path (classify -> type pipeline -> answer + trace) behind one object.

CONTRACT (used by serving/ and eval/); the pipelines implement it:

    rag = TypedRAG(settings, engine=..., retriever=..., reranker=..., classifier=...)
    rag = TypedRAG.from_settings(settings)          # builds every component from settings
    await rag.start(); ...; await rag.close()
    result: Result = await rag.answer(question, mode=None, force_type=None, top_k=None, seed=None)
    async for event in rag.answer_stream(question, ...):  # str deltas of the final answer,
        ...                                             # then exactly one Result, last
    results = await rag.answer_many(questions, ...)     # concurrent; engine batches them
"""
