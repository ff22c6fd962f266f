"""LLVM 22 through its C API: an object model for building, inspecting and rewriting IR.

Only owners (Context, Module, Builder, TargetMachine, LLJIT, MemoryBuffer) are disposed;
types, values, uses and blocks are borrowed views.  Editing contract: never erase the item a
`uses` / `instructions` / `blocks` iteration is currently on; iterate over `list(...)` instead.
"""

from ._base import live_owners
from .builder import FCMP_PREDICATES, ICMP_PREDICATES, Builder
from .capi import LLVMNotFoundError, version
from .context import Context
from .globals import CALLING_CONVENTIONS, LINKAGES, Attributes, Function, GlobalAlias, GlobalValue, GlobalVariable
from .module import LLVMError, MemoryBuffer, Module
from .orc import LLJIT
from .passes import run_passes
from .target import Target, TargetData, TargetMachine, host_cpu, host_features, host_triple, initialize
from .types import (ArrayType, FloatingType, FunctionType, IntegerType, LabelType, MetadataType, PointerType,
                    StructType, Type, VectorType, VoidType)
from .values import (AllocaInst, Argument, BasicBlock, BranchInst, CallInst, CompareInst, Constant,
                     ConstantExpr, ConstantFP, ConstantInt, GetElementPtrInst, Instruction, MemoryInst,
                     PHINode, PoisonValue, UndefValue, Use, User, Value, opcode_name)

__all__ = [
    "AllocaInst", "Argument", "ArrayType", "Attributes", "BasicBlock", "BranchInst", "Builder",
    "CALLING_CONVENTIONS", "CallInst", "CompareInst", "Constant", "ConstantExpr", "ConstantFP",
    "ConstantInt", "Context", "FCMP_PREDICATES", "FloatingType", "Function", "FunctionType",
    "GetElementPtrInst", "GlobalAlias", "GlobalValue", "GlobalVariable", "ICMP_PREDICATES",
    "Instruction", "IntegerType", "LINKAGES", "LLJIT", "LLVMError", "LLVMNotFoundError",
    "LabelType", "MemoryBuffer", "MemoryInst", "MetadataType", "Module", "PHINode", "PointerType",
    "PoisonValue", "StructType", "Target", "TargetData", "TargetMachine", "Type", "UndefValue",
    "Use", "User", "Value", "VectorType", "VoidType", "host_cpu", "host_features", "host_triple",
    "initialize", "live_owners", "opcode_name", "run_passes", "version",
]
