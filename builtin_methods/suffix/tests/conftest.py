import os
import sys

# Triton kernels run on CPU through the interpreter; it must be chosen before triton loads.
os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, os.path.dirname(__file__))
