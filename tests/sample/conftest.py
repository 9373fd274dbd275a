import os

# Triton kernels run on CPU through the interpreter; it must be set before triton compiles them.
os.environ.setdefault("TRITON_INTERPRET", "1")
