"""The HTTP routes, one ``APIRouter`` per endpoint family (as vLLM's entrypoints split
theirs): each module's ``router(...)`` takes what its routes need and holds no work;
:func:`serving.app.create_app` includes them."""
