"""Kernel entries without aggregate parameters: each by-value struct parameter becomes its scalar
elements, in order, nested structs depth-first (gpuc.abi.flat_values' order), for drivers that do not
take aggregate kernel arguments (SPIR-V's: docs/kernel-abi.md, "SPIR-V entries")."""

from __future__ import annotations

from ..llvm import AggregateInst, ArrayType, Builder, Constant, Function, FunctionType, Module, StructType


def leaves(ty, path=()) -> list:
    """The scalar elements of a value of type `ty`: (index path, type) pairs, depth-first; a scalar is
    its own one leaf with the path ()."""
    if isinstance(ty, StructType):
        elements = ty.elements
    elif isinstance(ty, ArrayType):
        elements = [ty.element_type] * ty.count
    else:
        return [(path, ty)]
    out = []
    for k, element in enumerate(elements):
        out += leaves(element, (*path, k))
    return out


def flatten_aggregate_params(module: Module, fn: Function) -> Function:
    """Replace the kernel `fn` by one of the same name taking each aggregate parameter's scalars (named
    `<param>.<k>[.<j>...]` by their index paths) instead, its body moved over and rebuilding the values;
    returns the new function (`fn` itself when it takes no aggregate, or is called)."""
    fnty = fn.function_type
    if fn.uses or fn.is_declaration or not any(isinstance(t, (StructType, ArrayType)) for t in fnty.params):
        return fn
    types, names = [], []
    for arg, ty in zip(fn.args, fnty.params):
        for path, leaf in leaves(ty):
            types.append(leaf)
            names.append(".".join([arg.name, *map(str, path)]))
    name = fn.name
    fn.name = f"{name}.aggregates"
    new = module.add_function(name, FunctionType.get(fnty.return_type, types))
    new.linkage = fn.linkage
    new.calling_convention = fn.calling_convention
    new.attributes.copy_from(fn.attributes)
    for arg, param_name in zip(new.args, names):
        arg.name = param_name
    for block in list(fn.blocks):
        new.append_existing_block(block)
    with Builder(module.context) as b:
        b.position_before(new.entry_block.instructions.first)
        k = 0
        for i, (arg, ty) in enumerate(zip(fn.args, fnty.params)):
            count = len(leaves(ty))
            if count == 1 and not isinstance(ty, (StructType, ArrayType)):
                new.param_attributes(k).copy_from(fn.param_attributes(i))
                arg.replace_all_uses_with(new.args[k])
            elif arg.uses:
                built = _Rebuilt(b, ty, iter(new.args[k:k + count]))
                arg.replace_all_uses_with(built.value)
                built.fold()
            k += count
    fn.erase()
    return new


class _Rebuilt:
    """An aggregate put together from scalars with insertvalue at the builder's position, nested ones
    first; `fold` then gives each extractvalue of it the element it reads, and erases what is unused."""

    def __init__(self, b: Builder, ty, scalars) -> None:
        elements = ty.elements if isinstance(ty, StructType) else [ty.element_type] * ty.count
        self.parts = [_Rebuilt(b, e, scalars) if isinstance(e, (StructType, ArrayType)) else next(scalars)
                      for e in elements]
        self.chain = []
        value = Constant.poison(ty)
        for k, part in enumerate(self.parts):
            value = b.insert_value(value, part.value if isinstance(part, _Rebuilt) else part, k)
            self.chain.append(value)
        self.value = value

    def fold(self) -> None:
        if not self.chain:  # an empty tuple: a constant, whose uses are not only these
            return
        for use in list(self.value.uses):
            user = use.user
            if not (isinstance(user, AggregateInst) and user.opcode_name == "extractvalue"):
                continue
            part = self
            for index in user.indices:
                part = part.parts[index]
            user.replace_all_uses_with(part.value if isinstance(part, _Rebuilt) else part)
            user.erase()
        if not self.value.uses:
            for inst in reversed(self.chain):
                inst.erase()
        for part in self.parts:
            if isinstance(part, _Rebuilt):
                part.fold()
