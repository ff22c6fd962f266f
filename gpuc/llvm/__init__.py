"""LLVM 22 through its C API: an object model for building, inspecting and rewriting IR.

Only owners (Context, Module, Builder, TargetMachine, LLJIT, MemoryBuffer) are disposed;
types, values, uses and blocks are borrowed views.  Editing contract: never erase the item a
`uses` / `instructions` / `blocks` iteration is currently on; iterate over `list(...)` instead.
"""

from ._base import live_owners, process_lifetime
from .builder import BINARY_OPERATIONS, CAST_OPERATIONS, Builder
from .capi import LLVMNotFoundError, version
from .context import Context
from .flags import (ATOMIC_ORDERINGS, ATOMIC_RMW_OPERATIONS, FAST_MATH_FLAGS, FCMP_PREDICATES, GEP_NO_WRAP_FLAGS,
                    ICMP_PREDICATES)
from .globals import CALLING_CONVENTIONS, LINKAGES, Attributes, CallSiteAttributes, Function, GlobalAlias, GlobalValue, GlobalVariable
from .instructions import (AggregateInst, AllocaInst, AtomicCmpXchgInst, AtomicRMWInst, BinaryOperator, BranchInst, CallInst,
                           CastInst, CompareInst, FenceInst, FreezeInst, GetElementPtrInst, LoadInst, MemoryInst,
                           PHINode, SelectInst, ShuffleVectorInst, StoreInst, UnaryOperator, intrinsic_id, intrinsic_name)
from .errors import LLVMError
from .module import MemoryBuffer, Module
from .orc import LLJIT
from .passes import run_passes
from .target import Target, TargetData, TargetMachine, host_cpu, host_features, host_triple, initialize
from .types import (ArrayType, FloatingType, FunctionType, IntegerType, LabelType, MetadataType, PointerType,
                    StructType, Type, VectorType, VoidType)
from .values import (Argument, BasicBlock, Constant, ConstantExpr, ConstantFP, ConstantInt, Instruction,
                     PoisonValue, UndefValue, Use, User, Value, opcode_name)

__all__ = [
    "ATOMIC_ORDERINGS", "ATOMIC_RMW_OPERATIONS", "AggregateInst", "AllocaInst", "Argument", "ArrayType", "AtomicCmpXchgInst",
    "AtomicRMWInst", "Attributes", "BINARY_OPERATIONS", "CallSiteAttributes", "BasicBlock", "BinaryOperator", "BranchInst",
    "Builder", "CALLING_CONVENTIONS", "CAST_OPERATIONS", "CallInst", "CastInst", "CompareInst", "Constant",
    "ConstantExpr", "ConstantFP", "ConstantInt", "Context", "FAST_MATH_FLAGS", "FCMP_PREDICATES", "FenceInst",
    "FloatingType", "FreezeInst", "Function", "FunctionType", "GEP_NO_WRAP_FLAGS", "GetElementPtrInst",
    "GlobalAlias", "GlobalValue", "GlobalVariable", "ICMP_PREDICATES", "Instruction", "IntegerType",
    "LINKAGES", "LLJIT", "LLVMError", "LLVMNotFoundError", "LabelType", "LoadInst", "MemoryBuffer",
    "MemoryInst", "MetadataType", "Module", "PHINode", "PointerType", "PoisonValue", "SelectInst", "ShuffleVectorInst",
    "StoreInst", "StructType", "Target", "TargetData", "TargetMachine", "Type", "UnaryOperator", "UndefValue",
    "Use", "User", "Value", "VectorType", "VoidType", "host_cpu", "host_features", "host_triple",
    "initialize", "intrinsic_id", "intrinsic_name", "live_owners", "opcode_name", "process_lifetime", "run_passes", "version",
]
