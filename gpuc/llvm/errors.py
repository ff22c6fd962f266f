"""The error LLVM's rejections become, importable by every module of the object model."""


class LLVMError(Exception):
    """LLVM rejected an operation (parse error, verifier failure, link conflict, ...)."""
