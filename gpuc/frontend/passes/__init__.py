"""The passes over a function body: inference (types and plans), iteration (what `for` walks) and
lowering (LLVM IR). They reach constructs only through the registry (core/registry.py), never by
import."""
