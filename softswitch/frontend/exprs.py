"""Expression typing: name resolution, type inference, implicit conversions and folding."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Sequence

from softswitch import ir
from softswitch.errors import P4Error, UnsupportedError
from softswitch.frontend import syntax as s
from softswitch.frontend.folding import fold_binary, fold_cast, fold_unary, mask
from softswitch.frontend.ir_ext import TypeVar
from softswitch.frontend.literals import check_width, parse_int, unescape
from softswitch.frontend.scope import Overloads, Scope
from softswitch.frontend.typeops import bind, has_typevar, same_type, substitute, type_str
from softswitch.frontend.visitor import Visitor

#: What an overload stands for (a declaration, a parameter list), returned by pick_overload.
_Decl = typing.TypeVar("_Decl")

_ARITH = {"+", "-", "*", "/", "%", "|+|", "|-|"}


_BITWISE = {"&", "|", "^"}


_COMPARE = {"==", "!=", "<", ">", "<=", ">="}


#: Pseudo-type of a name that refers to a table (the target of ``t.apply()``).
TABLE_REF_TYPE = ir.VoidType()


def any_subexpr(e: ir.Expr, pred: Callable[[object], bool]) -> bool:
    """Whether ``pred`` holds for ``e`` or any expression inside it (the checks that ask
    "does this expression read/call/apply something" share this one walk)."""
    todo: list[object] = [e]
    while todo:
        n = todo.pop()
        if pred(n):
            return True
        if isinstance(n, ir.Expr):
            todo += [v for k, v in vars(n).items() if k not in ("type", "loc", "var")]
        elif isinstance(n, (list, tuple)):
            todo += list(n)
        elif isinstance(n, dict):
            todo += list(n.values())
    return False


def _newtype_name(t: ir.Type) -> str | None:
    """The name of a ``type``-declared type, None for any other type."""
    return t.name if isinstance(t, ir.NewType) else None


class ExprChecker(Visitor):
    """Turns expression nodes into typed :mod:`softswitch.ir` expressions."""

    def expr(self, node: s.Expr, scope: Scope, expected: ir.Type | None = None) -> ir.Expr:
        """Check one expression; ``expected`` guides list/struct initialisers and literals."""
        result: ir.Expr = self.visit(node, scope, node.loc, expected)
        return result

    def visit_other(self, node: s.Node, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        raise P4Error(f"unsupported expression '{self.ctx.source_text(node)}'", loc)

    def visit_Binary(self, node: s.Binary, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        return self.binary(node.op, node.left, node.right, scope, loc)

    def visit_IntLit(self, node: s.IntLit, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        return parse_int(node.text, loc)

    def visit_StrLit(self, node: s.StrLit, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        return ir.StringConst(ir.StringType(), loc, unescape(node.text))

    def visit_BoolLit(
        self, node: s.BoolLit, scope: Scope, loc: ir.Loc, expected: object
    ) -> ir.Expr:
        return ir.BoolConst(ir.BoolType(), loc, node.value)

    def visit_DontCareExpr(
        self, node: s.DontCareExpr, scope: Scope, loc: ir.Loc, expected: object
    ) -> ir.Expr:
        return ir.DontCare(ir.DontCareType(), loc)

    def visit_InvalidExpr(
        self, node: s.InvalidExpr, scope: Scope, loc: ir.Loc, expected: object
    ) -> ir.Expr:
        t = ir.strip_newtype(expected) if isinstance(expected, ir.Type) else None
        if not isinstance(t, (ir.HeaderType, ir.HeaderUnionType)):
            return ir.InvalidHeader(ir.DontCareType(), loc)
        return ir.InvalidHeader(t, loc)

    def visit_NameRef(
        self, node: s.NameRef, scope: Scope, loc: ir.Loc, expected: object
    ) -> ir.Expr:
        name = node.name
        target = scope.root().lookup(name) if node.dotted else scope.lookup(name)
        if target is None:
            if name in self.ctx.match_kinds:
                return ir.MatchKindMember(ir.MatchKindType(), loc, name)
            raise P4Error(f"no declaration named '{name}'", loc)
        return self.ref_to(target, name, loc)

    def ref_to(self, target: object, name: str, loc: ir.Loc) -> ir.Expr:
        """An expression referring to the declaration ``target``."""
        if isinstance(target, ir.Variable):
            return ir.VarRef(target.type, loc, target)
        if isinstance(target, ir.Expr):  # a folded constant
            return dataclasses.replace(target, loc=loc)
        if isinstance(target, ir.Instance):
            return ir.InstanceRef(target.type, loc, target)
        if isinstance(target, ir.TableDecl):
            return ir.InstanceRef(TABLE_REF_TYPE, loc, target)
        if isinstance(target, (ir.ActionDecl, ir.FunctionDecl, Overloads)):
            raise P4Error(f"'{name}' is a callable; it can only be called", loc)
        raise P4Error(f"'{name}' cannot be used in an expression", loc)

    def visit_TypeMember(
        self, node: s.TypeMember, scope: Scope, loc: ir.Loc, expected: object
    ) -> ir.Expr:
        t = self.ctx.typing.resolve_type(node.type, scope)
        member = node.member
        et = ir.strip_newtype(t)
        if isinstance(et, ir.EnumType):
            if member not in et.members:
                raise P4Error(f"enum '{et.name}' has no member '{member}'", node.member_loc)
            return ir.EnumMember(et, loc, member)
        raise P4Error(f"type '{type_str(t)}' has no member '{member}'", loc)

    def visit_ErrorMember(
        self, node: s.ErrorMember, scope: Scope, loc: ir.Loc, expected: object
    ) -> ir.Expr:
        member = node.member
        if member not in self.ctx.errors:
            raise P4Error(f"no error named '{member}'", loc)
        return ir.ErrorMember(ir.ErrorType(), loc, member, self.ctx.errors.index(member))

    def visit_ListExpr(
        self, node: s.ListExpr, scope: Scope, loc: ir.Loc, expected: object
    ) -> ir.Expr:
        elem_trees = node.items
        exp = ir.strip_newtype(expected) if isinstance(expected, ir.Type) else None
        if isinstance(exp, (ir.StructType, ir.HeaderType)):
            if len(elem_trees) != len(exp.fields):
                raise P4Error(
                    f"initializer has {len(elem_trees)} elements, but '{exp.name}' has "
                    f"{len(exp.fields)} fields",
                    loc,
                )
            fields = {
                f.name: self.convert(self.expr(e, scope, f.type), f.type, e.loc, "initializer")
                for f, e in zip(exp.fields, elem_trees, strict=False)
            }
            return ir.StructInit(exp, loc, fields)
        hints: Sequence[ir.Type | None] = (
            exp.elems
            if isinstance(exp, ir.TupleType) and len(exp.elems) == len(elem_trees)
            else [None] * len(elem_trees)
        )
        elems = [self.expr(e, scope, h) for e, h in zip(elem_trees, hints, strict=False)]
        return ir.ListExpr(ir.TupleType(tuple(e.type for e in elems)), loc, elems)

    def visit_StructInit(
        self, node: s.StructInit, scope: Scope, loc: ir.Loc, expected: object
    ) -> ir.Expr:
        exp = ir.strip_newtype(expected) if isinstance(expected, ir.Type) else None
        if not isinstance(exp, (ir.StructType, ir.HeaderType)):
            raise P4Error("cannot infer the type of this structure initializer", loc)
        given: dict[str, s.Expr] = {}
        for kv in node.fields:
            if kv.name in given:
                raise P4Error(f"field '{kv.name}' initialized twice", kv.loc)
            given[kv.name] = kv.value
        fields: dict[str, ir.Expr] = {}
        for f in exp.fields:
            if f.name not in given:
                raise P4Error(f"field '{f.name}' of '{exp.name}' is not initialized", loc)
            e = given.pop(f.name)
            fields[f.name] = self.convert(self.expr(e, scope, f.type), f.type, e.loc, "initializer")
        if given:
            extra = next(iter(given))
            raise P4Error(f"'{exp.name}' has no field '{extra}'", loc)
        return ir.StructInit(exp, loc, fields)

    def visit_Mux(self, node: s.Mux, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        c_tree, t_tree, e_tree = node.cond, node.then, node.else_
        cond = self.expect_bool(self.expr(c_tree, scope), c_tree.loc, "condition of '?:'")
        then = self.expr(t_tree, scope, expected if isinstance(expected, ir.Type) else None)
        else_ = self.expr(e_tree, scope, expected if isinstance(expected, ir.Type) else None)
        then, else_ = self.unify(then, else_, loc, "?:")
        if isinstance(cond, ir.BoolConst) and isinstance(then.type, ir.IntLitType):
            return then if cond.value else else_
        if isinstance(then.type, ir.IntLitType):
            raise P4Error("cannot infer the width of the operands of '?:'", loc)
        return ir.Mux(then.type, loc, cond, then, else_)

    def visit_Unary(self, node: s.Unary, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        op = {"!": self._not, "~": self._compl, "-": self._neg, "+": self._pos}[node.op]
        return op(node.operand, scope, loc)

    def _not(self, operand: s.Expr, scope: Scope, loc: ir.Loc) -> ir.Expr:
        e = self.expect_bool(self.expr(operand, scope), loc, "operand of '!'")
        if isinstance(e, ir.BoolConst):
            return ir.BoolConst(ir.BoolType(), loc, not e.value)
        return ir.Unary(ir.BoolType(), loc, "!", e)

    def _compl(self, operand: s.Expr, scope: Scope, loc: ir.Loc) -> ir.Expr:
        e = self.expr(operand, scope)
        t = e.type  # not stripped: a 'type' needs a cast first, as in p4c
        if not isinstance(t, ir.BitType):
            raise P4Error(f"'~' cannot be applied to an operand of type {type_str(e.type)}", loc)
        if isinstance(e, ir.Const):
            return fold_unary("~", e, loc)
        return ir.Unary(e.type, loc, "~", e)

    def _neg(self, operand: s.Expr, scope: Scope, loc: ir.Loc) -> ir.Expr:
        e = self.expr(operand, scope)
        t = e.type  # not stripped: a 'type' needs a cast first, as in p4c
        if not isinstance(t, (ir.BitType, ir.IntLitType)):
            raise P4Error(f"'-' cannot be applied to an operand of type {type_str(e.type)}", loc)
        if isinstance(e, ir.Const):
            return fold_unary("-", e, loc)
        return ir.Unary(e.type, loc, "-", e)

    def _pos(self, operand: s.Expr, scope: Scope, loc: ir.Loc) -> ir.Expr:
        e = self.expr(operand, scope)
        if not isinstance(e.type, (ir.BitType, ir.IntLitType)):
            raise P4Error(f"'+' cannot be applied to an operand of type {type_str(e.type)}", loc)
        return e

    def visit_Cast(self, node: s.Cast, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        t = self.ctx.typing.resolve_type(node.type, scope)
        e = self.expr(node.operand, scope, t)
        return self.cast(e, t, loc)

    def cast(self, e: ir.Expr, t: ir.Type, loc: ir.Loc) -> ir.Expr:
        """An explicit cast ``(t) e`` (folded when ``e`` is constant)."""
        src, dst = ir.strip_newtype(e.type), ir.strip_newtype(t)
        if (
            same_type(src, dst)
            and not isinstance(t, ir.NewType)
            and not isinstance(e.type, ir.NewType)
        ):
            return e
        ok = False
        if isinstance(dst, ir.BitType):
            ok = (
                isinstance(src, (ir.BitType, ir.IntLitType))
                or (isinstance(src, ir.BoolType) and dst.width == 1 and not dst.signed)
                or (isinstance(src, ir.EnumType) and src.underlying is not None)
            )
        elif isinstance(dst, ir.BoolType):
            ok = (isinstance(src, ir.BitType) and src.width == 1 and not src.signed) or (
                isinstance(src, ir.IntLitType)
            )
        elif isinstance(dst, ir.IntLitType):
            ok = isinstance(src, ir.IntLitType)
        elif isinstance(dst, ir.EnumType) and dst.underlying is not None:
            ok = isinstance(src, (ir.BitType, ir.IntLitType))
        elif isinstance(dst, (ir.StructType, ir.HeaderType, ir.TupleType)):
            return self.convert(e, t, loc, "cast")
        elif same_type(src, dst):
            ok = True
        if not ok:
            raise P4Error(
                f"cannot cast an expression of type {type_str(e.type)} to {type_str(t)}", loc
            )
        if isinstance(e, (ir.Const, ir.BoolConst)) and isinstance(
            dst, (ir.BitType, ir.BoolType, ir.IntLitType)
        ):
            return fold_cast(e, dst, loc)
        return ir.Cast(t, loc, e)

    def binary(
        self,
        op: str,
        lt: s.Expr,
        rt: s.Expr,
        scope: Scope,
        loc: ir.Loc,
        left: ir.Expr | None = None,
    ) -> ir.Expr:
        """Check and fold a binary operation (``left``: the left operand already checked)."""
        left = self.expr(lt, scope) if left is None else left
        right = self.expr(
            rt, scope, left.type if not isinstance(left.type, ir.IntLitType) else None
        )
        if isinstance(left, ir.DontCare) or isinstance(right, ir.DontCare):
            raise P4Error(f"'_' cannot be an operand of '{op}'", loc)
        if op in ("&&", "||"):
            return self.logical(op, left, right, lt.loc, rt.loc, loc)
        _check_operands(op, left, right, loc)
        if op in ("<<", ">>"):
            if isinstance(right.type, ir.NewType):
                raise P4Error(
                    f"the shift amount of '{op}' must be bit<S> or a non-negative constant, not "
                    f"{type_str(right.type)}",
                    loc,
                )
            return self.shift(op, left, right, loc)
        if op == "++":
            return self.concat(left, right, loc)
        left, right = self.unify(left, right, loc, op)
        if op in _COMPARE:
            return _compare(op, left, right, loc)
        return self.arithmetic(op, left, right, loc)

    def logical(
        self, op: str, left: ir.Expr, right: ir.Expr, lloc: ir.Loc, rloc: ir.Loc, loc: ir.Loc
    ) -> ir.Expr:
        """``&&``/``||`` on bools, folded when both are constants."""
        left = self.expect_bool(left, lloc, f"operand of '{op}'")
        right = self.expect_bool(right, rloc, f"operand of '{op}'")
        if isinstance(left, ir.BoolConst) and isinstance(right, ir.BoolConst):
            v = (left.value and right.value) if op == "&&" else (left.value or right.value)
            return ir.BoolConst(ir.BoolType(), loc, v)
        return ir.Binary(ir.BoolType(), loc, op, left, right)

    def arithmetic(self, op: str, left: ir.Expr, right: ir.Expr, loc: ir.Loc) -> ir.Expr:
        """An arithmetic or bitwise operation on unified numbers, folded when both are
        constants."""
        t = ir.strip_newtype(left.type)
        if not isinstance(t, (ir.BitType, ir.IntLitType)):
            raise P4Error(
                f"'{op}' cannot be applied to operands of type {type_str(left.type)}", loc
            )
        if op in ("|+|", "|-|") and isinstance(t, ir.IntLitType):
            raise P4Error(f"'{op}' needs operands of a fixed width", loc)
        if op in ("/", "%") and isinstance(t, ir.BitType) and t.signed:
            raise P4Error(f"'{op}' is not defined on signed values of type {type_str(t)}", loc)
        if op in ("/", "%") and isinstance(right, ir.Const) and right.value == 0:
            raise P4Error("division by zero", loc)
        if isinstance(left, ir.Const) and isinstance(right, ir.Const):
            return fold_binary(op, left, right, loc)
        self.ctx.bmv2.runtime_division(op, left, right, loc)
        return ir.Binary(left.type, loc, op, left, right)

    def shift(self, op: str, left: ir.Expr, right: ir.Expr, loc: ir.Loc) -> ir.Expr:
        """``<<``/``>>``: the result has the left operand's type."""
        lt, rt = ir.strip_newtype(left.type), ir.strip_newtype(right.type)
        if not isinstance(lt, (ir.BitType, ir.IntLitType)):
            raise P4Error(f"'{op}' cannot shift a value of type {type_str(left.type)}", loc)
        if not isinstance(rt, (ir.BitType, ir.IntLitType)) or (
            isinstance(rt, ir.BitType) and rt.signed
        ):
            raise P4Error(f"the shift amount of '{op}' must be an unsigned number", loc)
        if isinstance(right, ir.Const) and isinstance(rt, ir.IntLitType) and right.value < 0:
            raise P4Error(f"negative shift amount {right.value}", loc)
        if isinstance(lt, ir.IntLitType) and not isinstance(right, ir.Const):
            raise P4Error(f"the width of the left operand of '{op}' must be known", loc)
        if isinstance(left, ir.Const) and isinstance(right, ir.Const):
            return fold_binary(op, left, right, loc)
        return ir.Binary(left.type, loc, op, left, right)

    def concat(self, left: ir.Expr, right: ir.Expr, loc: ir.Loc) -> ir.Expr:
        """``a ++ b``: widths add up; both operands need a fixed width."""
        lt, rt = ir.strip_newtype(left.type), ir.strip_newtype(right.type)
        if not isinstance(lt, ir.BitType) or not isinstance(rt, ir.BitType):
            bad = left if not isinstance(lt, ir.BitType) else right
            raise P4Error(f"'++' needs operands of a fixed width, not {type_str(bad.type)}", loc)
        check_width(lt.width + rt.width, loc, "'++' result")
        t = ir.BitType(lt.width + rt.width, lt.signed)
        if isinstance(left, ir.Const) and isinstance(right, ir.Const):
            return ir.Const(t, loc, (left.value << rt.width) | right.value)
        return ir.Binary(t, loc, "++", left, right)

    def unify(self, a: ir.Expr, b: ir.Expr, loc: ir.Loc, op: str) -> tuple[ir.Expr, ir.Expr]:
        """Give an unsized literal the other operand's type; otherwise types must agree."""
        at, bt = ir.strip_newtype(a.type), ir.strip_newtype(b.type)
        if isinstance(at, ir.IntLitType) and not isinstance(bt, ir.IntLitType):
            return self.convert(a, b.type, loc, f"operand of '{op}'"), b
        if isinstance(bt, ir.IntLitType) and not isinstance(at, ir.IntLitType):
            return a, self.convert(b, a.type, loc, f"operand of '{op}'")
        if isinstance(a, ir.InvalidHeader) and isinstance(a.type, ir.DontCareType):
            return self.convert(a, b.type, loc, op), b
        if isinstance(b, ir.InvalidHeader) and isinstance(b.type, ir.DontCareType):
            return a, self.convert(b, a.type, loc, op)
        if not same_type(at, bt):
            if isinstance(at, ir.BitType) and isinstance(bt, ir.BitType):
                raise P4Error(
                    f"operands of '{op}' have different types: {type_str(a.type)} and "
                    f"{type_str(b.type)}",
                    loc,
                )
            raise P4Error(
                f"operands of '{op}' have incompatible types: {type_str(a.type)} and "
                f"{type_str(b.type)}",
                loc,
            )
        return a, b

    def expect_bool(self, e: ir.Expr, loc: ir.Loc, what: str) -> ir.Expr:
        """``e`` must be a bool."""
        if not isinstance(ir.strip_newtype(e.type), ir.BoolType):
            raise P4Error(f"{what} must be a bool, not {type_str(e.type)}", loc)
        return e

    def convert(self, e: ir.Expr, t: ir.Type, loc: ir.Loc, what: str) -> ir.Expr:
        """Implicit conversion of ``e`` to type ``t`` (literals, initialisers), or an error."""
        dst = ir.strip_newtype(t)
        src = ir.strip_newtype(e.type)
        if isinstance(dst, TypeVar) or has_typevar(dst) or isinstance(dst, ir.DontCareType):
            return e
        if same_type(src, dst):
            _check_same_newtype(e, t, loc, what)
            return e
        if isinstance(src, ir.IntLitType) and isinstance(e, ir.Const):
            if isinstance(dst, ir.BitType):
                return ir.Const(dst, e.loc, mask(e.value, dst.width))
        if isinstance(e, ir.ListExpr):
            converted = self.convert_list(e, dst, what)
            if converted is not None:
                return converted
        if isinstance(e, ir.InvalidHeader) and isinstance(dst, (ir.HeaderType, ir.HeaderUnionType)):
            return ir.InvalidHeader(dst, e.loc)
        if isinstance(e, ir.DontCare):
            return e
        if isinstance(dst, ir.BlockProtoType) and isinstance(src, ir.BlockType):
            self.check_block_fits(src.decl, dst, loc, what)
            return e
        raise P4Error(
            f"{what}: cannot convert an expression of type {type_str(e.type)} to {type_str(t)}", loc
        )

    def convert_list(self, e: ir.ListExpr, dst: ir.Type, what: str) -> ir.Expr | None:
        """A list expression as a struct/header initialiser or a tuple of the same length,
        each element converted (None: it is neither)."""
        if isinstance(dst, (ir.StructType, ir.HeaderType)) and len(e.elems) == len(dst.fields):
            fields = {
                f.name: self.convert(x, f.type, x.loc, what)
                for f, x in zip(dst.fields, e.elems, strict=False)
            }
            return ir.StructInit(dst, e.loc, fields)
        if isinstance(dst, ir.TupleType) and len(e.elems) == len(dst.elems):
            elems = [
                self.convert(x, y, x.loc, what) for x, y in zip(e.elems, dst.elems, strict=False)
            ]
            return ir.ListExpr(ir.TupleType(tuple(x.type for x in elems)), e.loc, elems)
        return None

    def check_block_fits(
        self, decl: ir.ParserDecl | ir.ControlDecl, proto: ir.BlockProtoType, loc: ir.Loc, what: str
    ) -> None:
        """A parser/control instance passed for a constructor parameter of type ``proto``
        must have the prototype's kind and apply parameters."""
        kind = "parser" if isinstance(decl, ir.ParserDecl) else "control"
        ok = kind == proto.kind and len(decl.params) == len(proto.params)
        if ok:
            for want, have in zip(proto.params, decl.params, strict=True):
                if want.direction != have.direction or not same_type(want.type, have.type):
                    ok = False
        if not ok:
            raise P4Error(
                f"{what}: {kind} '{decl.name}' does not match the type '{proto.name}'", loc
            )

    def visit_Member(self, node: s.Member, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        base = self.expr(node.base, scope)
        return self.member(base, node.member, loc)

    def member(self, base: ir.Expr, member: str, loc: ir.Loc) -> ir.Expr:
        """``base.member`` for fields, stack properties and table-apply results."""
        t = ir.strip_newtype(base.type)
        if isinstance(t, (ir.HeaderType, ir.StructType, ir.HeaderUnionType)):
            for f in t.fields:
                if f.name == member:
                    return ir.Member(f.type, loc, base, member)
            kind = {
                ir.HeaderType: "header",
                ir.StructType: "struct",
                ir.HeaderUnionType: "header_union",
            }[type(t)]
            raise P4Error(f"{kind} '{t.name}' has no field '{member}'", loc)
        if isinstance(t, ir.StackType):
            if member in ("next", "last"):
                return ir.Member(t.elem, loc, base, member)
            if member in ("lastIndex", "size"):
                return ir.Member(ir.BitType(32), loc, base, member)
            raise P4Error(f"header stack has no member '{member}'", loc)
        if isinstance(t, ir.TableApplyResultType):
            if member in ("hit", "miss"):
                return ir.Member(ir.BoolType(), loc, base, member)
            if member == "action_run":
                return ir.Member(ir.ActionRunType(t.table), loc, base, member)
            raise P4Error(f"table apply result has no member '{member}'", loc)
        raise P4Error(f"expression of type {type_str(base.type)} has no member '{member}'", loc)

    def visit_Index(self, node: s.Index, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        base = self.expr(node.base, scope)
        index = self.expr(node.index, scope)
        t = ir.strip_newtype(base.type)
        if not isinstance(t, ir.StackType):
            raise P4Error(f"cannot index an expression of type {type_str(base.type)}", loc)
        it = ir.strip_newtype(index.type)
        if not isinstance(it, (ir.BitType, ir.IntLitType)):
            raise P4Error(f"a stack index must be a number, not {type_str(index.type)}", loc)
        if isinstance(index, ir.Const):
            if not 0 <= index.value < t.size:
                raise P4Error(
                    f"index {index.value} is out of range for a stack of size {t.size}", loc
                )
            if isinstance(it, ir.IntLitType):
                index = ir.Const(ir.BitType(32), index.loc, index.value)
        else:
            self.ctx.bmv2.union_stack_index(t, index, loc)
        return ir.Index(t.elem, loc, base, index)

    def visit_Slice(self, node: s.Slice, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        base = self.expr(node.base, scope)
        hi = self.const_int(node.hi, scope, "slice bound")
        lo = self.const_int(node.lo, scope, "slice bound")
        t = ir.strip_newtype(base.type)
        if not isinstance(t, ir.BitType):
            raise P4Error(f"cannot slice an expression of type {type_str(base.type)}", loc)
        if hi < lo or lo < 0 or hi >= t.width:
            raise P4Error(f"slice [{hi}:{lo}] is out of range for {type_str(base.type)}", loc)
        rt = ir.BitType(hi - lo + 1)
        if isinstance(base, ir.Const):
            return ir.Const(rt, loc, (base.value >> lo) & ((1 << (hi - lo + 1)) - 1))
        if isinstance(base, ir.Slice):  # x[h1:l1][h2:l2] is x[l1+h2 : l1+l2], also as a target
            return ir.Slice(rt, loc, base.base, base.lo + hi, base.lo + lo)
        return ir.Slice(rt, loc, base, hi, lo)

    def const_int(self, tree: s.Expr, scope: Scope, what: str) -> int:
        """A compile-time integer."""
        e = self.expr(tree, scope)
        if not isinstance(e, ir.Const):
            raise P4Error(f"{what} must be a compile-time constant", tree.loc)
        return e.value

    def check_lvalue(self, e: ir.Expr, loc: ir.Loc) -> None:
        """``e`` must be assignable."""
        if isinstance(e, ir.VarRef):
            v = e.var
            if isinstance(v, ir.Param) and v.direction == "in":
                raise P4Error(f"cannot assign to in parameter '{v.name}'", loc)
            if isinstance(v, ir.Param) and v.direction == "":
                raise P4Error(f"cannot assign to read-only parameter '{v.name}'", loc)
            return
        if isinstance(e, ir.Member):
            if isinstance(ir.strip_newtype(e.base.type), ir.StackType) and e.name in (
                "lastIndex",
                "size",
            ):
                raise P4Error("expression is not assignable", loc)
            if isinstance(ir.strip_newtype(e.base.type), ir.TableApplyResultType):
                raise P4Error("expression is not assignable", loc)
            self.check_lvalue(e.base, loc)
            return
        if isinstance(e, (ir.Index, ir.Slice)):
            self.check_lvalue(e.base, loc)
            return
        raise P4Error("expression is not assignable", loc)

    def visit_Call(self, node: s.Call, scope: Scope, loc: ir.Loc, expected: object) -> ir.Expr:
        type_args = [self.ctx.typing.resolve_type(t, scope) for t in node.type_args]
        return self.call(node.callee, type_args, node.args, scope, loc)

    def visit_CtorCall(
        self, node: s.CtorCall, scope: Scope, loc: ir.Loc, expected: object
    ) -> ir.Expr:
        if isinstance(expected, (ir.BlockType, ir.BlockProtoType)):
            raise UnsupportedError(
                "a parser or control constructed inside a constructor argument list", loc
            )
        raise P4Error("a constructor call is only allowed in an instantiation", loc)

    def call(
        self, callee: s.Expr, type_args: list[ir.Type], args: s.Args, scope: Scope, loc: ir.Loc
    ) -> ir.Expr:
        """A function, action, extern function or method call."""
        arg_trees = list(args.items)
        if isinstance(callee, s.NameRef):
            name = callee.name
            target = scope.root().lookup(name) if callee.dotted else scope.lookup(name)
            if target is None:
                raise P4Error(f"no declaration named '{name}'", callee.loc)
            if isinstance(target, ir.ActionDecl):
                call_args = self.bind_args(
                    target.params, arg_trees, scope, loc, f"action '{name}'", {}
                )
                return ir.Call(ir.VoidType(), loc, target, call_args)
            if isinstance(target, ir.FunctionDecl):
                call_args = self.bind_args(
                    target.params, arg_trees, scope, loc, f"function '{name}'", {}
                )
                return ir.Call(target.return_type, loc, target, call_args)
            if isinstance(target, Overloads):
                decl = self.pick_overload(
                    [(d.params, d) for d in target.decls], arg_trees, loc, f"function '{name}'"
                )
                binding = dict(zip(decl.type_params, type_args, strict=False))
                if type_args and len(type_args) != len(decl.type_params):
                    raise P4Error(
                        f"function '{name}' expects {len(decl.type_params)} type arguments, "
                        f"got {len(type_args)}",
                        loc,
                    )
                call_args = self.bind_args(
                    decl.params, arg_trees, scope, loc, f"function '{name}'", binding
                )
                if name == "static_assert" and decl.name == "static_assert":
                    return self.static_assert(call_args, loc)
                self.ctx.bmv2.check_nested_out_struct(decl, call_args, loc)
                rt = self.finish_return(decl.return_type, binding, loc, name)
                targs = tuple(binding.get(p, ir.DontCareType()) for p in decl.type_params)
                return ir.Call(rt, loc, decl, call_args, targs)
            raise P4Error(f"'{name}' is not a function, action or method", callee.loc)
        if isinstance(callee, s.Member):
            base = self.expr(callee.base, scope)
            return self.method_call(base, callee.member, type_args, arg_trees, scope, loc)
        if isinstance(callee, s.TypeMember):
            raise UnsupportedError("calling a method of a type", loc)
        raise P4Error(f"'{self.ctx.source_text(callee)}' cannot be called", loc)

    def static_assert(self, args: list[ir.Expr | None], loc: ir.Loc) -> ir.Expr:
        """``static_assert(check[, message])`` is decided here, at compile time."""
        check = args[0]
        if not isinstance(check, ir.BoolConst):
            raise P4Error("static_assert needs a compile-time constant condition", loc)
        if not check.value:
            msg = (
                args[1].value
                if len(args) > 1 and isinstance(args[1], ir.StringConst)
                else "static assertion failed"
            )
            raise P4Error(msg, loc)
        return ir.BoolConst(ir.BoolType(), loc, True)

    def finish_return(
        self, rt: ir.Type, binding: dict[str, ir.Type], loc: ir.Loc, name: str
    ) -> ir.Type:
        """Return type after substitution; it must not mention an unbound type variable."""
        rt = substitute(rt, binding)
        if has_typevar(rt):
            raise P4Error(f"cannot infer the return type of '{name}'; give its type arguments", loc)
        return rt

    def pick_overload(
        self,
        options: Sequence[tuple[list[ir.Param], _Decl]],
        arg_trees: Sequence[s.Arg],
        loc: ir.Loc,
        what: str,
    ) -> _Decl:
        """The overload whose parameter count fits the arguments."""
        n = len(arg_trees)
        named = {a.name for a in arg_trees if isinstance(a, s.NamedArg)}
        for params, decl in options:
            required = sum(1 for p in params if p.default is None)
            if required <= n <= len(params) and named <= {p.name for p in params}:
                return decl
        counts = sorted({len(p) for p, _ in options})
        want = " or ".join(str(c) for c in counts)
        raise P4Error(f"{what}: expected {want} arguments, got {n}", loc)

    def method_call(
        self,
        base: ir.Expr,
        method: str,
        type_args: list[ir.Type],
        arg_trees: Sequence[s.Arg],
        scope: Scope,
        loc: ir.Loc,
    ) -> ir.Expr:
        """``base.method(args)``: externs, tables, sub-blocks, header/stack built-ins."""
        t = ir.strip_newtype(base.type)
        if isinstance(base, ir.InstanceRef) and isinstance(base.instance, ir.TableDecl):
            return self.table_apply(base, base.instance, method, arg_trees, loc)
        if isinstance(t, ir.BlockType):
            return self.block_apply(base, t.decl.name, t.decl.params, method, arg_trees, scope, loc)
        if isinstance(t, ir.ExternType):
            return self.extern_method(base, t, method, type_args, arg_trees, scope, loc)
        if isinstance(t, (ir.HeaderType, ir.HeaderUnionType)):
            call = self.header_method(base, t, method, arg_trees, loc)
            if call is not None:
                return call
        if isinstance(t, ir.StackType) and method in ("push_front", "pop_front"):
            return self.stack_shift(base, method, arg_trees, scope, loc)
        if isinstance(t, ir.BlockProtoType):
            # a constructor parameter bound to a parser/control instance
            return self.block_apply(base, t.name, t.params, method, arg_trees, scope, loc)
        raise P4Error(f"expression of type {type_str(base.type)} has no method '{method}'", loc)

    def table_apply(
        self,
        base: ir.Expr,
        table: ir.TableDecl,
        method: str,
        arg_trees: Sequence[s.Arg],
        loc: ir.Loc,
    ) -> ir.Expr:
        """``t.apply()``: a table has no other method and its apply no arguments."""
        if method != "apply":
            raise P4Error(f"table '{table.name}' has no method '{method}'", loc)
        if arg_trees:
            raise P4Error("a table's apply() takes no arguments", loc)
        return ir.MethodCall(ir.TableApplyResultType(table), loc, base, "apply", [])

    def block_apply(
        self,
        base: ir.Expr,
        name: str,
        params: list[ir.Param],
        method: str,
        arg_trees: Sequence[s.Arg],
        scope: Scope,
        loc: ir.Loc,
    ) -> ir.Expr:
        """``b.apply(args)`` on a sub-parser/sub-control instance or a block parameter."""
        if method != "apply":
            raise P4Error(f"'{name}' has no method '{method}'", loc)
        call_args = self.bind_args(params, arg_trees, scope, loc, f"'{name}.apply'", {})
        return ir.MethodCall(ir.VoidType(), loc, base, "apply", call_args)

    def extern_method(
        self,
        base: ir.Expr,
        t: ir.ExternType,
        method: str,
        type_args: list[ir.Type],
        arg_trees: Sequence[s.Arg],
        scope: Scope,
        loc: ir.Loc,
    ) -> ir.Expr:
        """A method of an extern object: pick the overload, bind the type variables (the
        object's and the method's own), bind the arguments."""
        decl = self.ctx.typing.extern_decl(t.name, loc)
        overloads = decl.methods.get(method)
        if not overloads:
            raise P4Error(f"extern '{t.name}' has no method '{method}'", loc)
        options = [(ps, ps) for ps in overloads]
        params: list[ir.Param] = self.pick_overload(options, arg_trees, loc, f"method '{method}'")
        binding = dict(zip(decl.type_params, t.type_args, strict=False))
        mtparams = self.ctx.typing.method_type_params(params)
        if type_args:
            self.bind_method_type_args(method, mtparams, type_args, binding, loc)
        call_args = self.bind_args(params, arg_trees, scope, loc, f"method '{method}'", binding)
        if t.name == "packet_in" and method == "extract" and call_args and call_args[0] is not None:
            self.check_extract(call_args)
        if t.name == "register" and method == "read" and t.type_args:
            self.ctx.bmv2.check_register_value(base, t.type_args[0], call_args)
        rt = self.finish_return(self.ctx.typing.method_return(params), binding, loc, method)
        targs = tuple(binding.get(p, ir.DontCareType()) for p in mtparams)
        return ir.MethodCall(rt, loc, base, method, call_args, targs)

    def bind_method_type_args(
        self,
        method: str,
        mtparams: list[str],
        type_args: list[ir.Type],
        binding: dict[str, ir.Type],
        loc: ir.Loc,
    ) -> None:
        """Explicit type arguments of an extern method: as many as it has type variables,
        none of them void, an extern or a string."""
        if len(type_args) != len(mtparams):
            raise P4Error(
                f"method '{method}' expects {len(mtparams)} type arguments, got "
                f"{len(type_args)}",
                loc,
            )
        binding.update(zip(mtparams, type_args, strict=False))
        for ta in type_args:
            if isinstance(ir.strip_newtype(ta), (ir.VoidType, ir.ExternType, ir.StringType)):
                raise P4Error(f"method '{method}': illegal type argument {type_str(ta)}", loc)

    def check_extract(self, call_args: list[ir.Expr | None]) -> None:
        """``packet_in.extract``: the first argument is a header, and a size argument needs
        a varbit field to size."""
        first = call_args[0]
        assert first is not None
        ht = ir.strip_newtype(first.type)
        if not isinstance(ht, ir.HeaderType):
            raise P4Error(
                f"method 'extract': the argument must be a header, not {type_str(first.type)}",
                first.loc,
            )
        has_varbit = any(isinstance(f.type, ir.VarbitType) for f in ht.fields)
        if len(call_args) > 1 and not has_varbit:
            raise P4Error(
                f"method 'extract': header {ht.name} has no varbit field for the size argument",
                first.loc,
            )

    def header_method(
        self,
        base: ir.Expr,
        t: ir.HeaderType | ir.HeaderUnionType,
        method: str,
        arg_trees: Sequence[s.Arg],
        loc: ir.Loc,
    ) -> ir.Expr | None:
        """The built-in methods of headers and unions (None: no such method)."""
        if method == "isValid":
            self.no_args(arg_trees, method, loc)
            return ir.MethodCall(ir.BoolType(), loc, base, method, [])
        if method in ("setValid", "setInvalid") and isinstance(t, ir.HeaderType):
            self.no_args(arg_trees, method, loc)
            self.check_lvalue(base, loc)
            return ir.MethodCall(ir.VoidType(), loc, base, method, [])
        if method in ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes"):
            self.no_args(arg_trees, method, loc)
            bits = t.bit_width if isinstance(t, ir.HeaderType) else 0
            if isinstance(t, ir.HeaderType) and method.startswith("max"):
                bits += sum(f.type.max_width for f in t.fields if isinstance(f.type, ir.VarbitType))
            v = bits if method.endswith("Bits") else (bits + 7) // 8
            return ir.Const(ir.IntLitType(), loc, v)
        return None

    def stack_shift(
        self,
        base: ir.Expr,
        method: str,
        arg_trees: Sequence[s.Arg],
        scope: Scope,
        loc: ir.Loc,
    ) -> ir.Expr:
        """``push_front``/``pop_front`` on a header stack: one compile-time count."""
        if len(arg_trees) != 1:
            raise P4Error(f"'{method}' expects 1 argument, got {len(arg_trees)}", loc)
        self.check_lvalue(base, loc)
        arg = arg_trees[0]
        if isinstance(arg, s.NamedArg):  # what expr() reports for a node it cannot check
            raise P4Error(f"unsupported expression '{self.ctx.source_text(arg)}'", arg.loc)
        count = self.const_int(arg, scope, f"the argument of '{method}'")
        return ir.MethodCall(
            ir.VoidType(), loc, base, method, [ir.Const(ir.IntLitType(), loc, count)]
        )

    def no_args(self, arg_trees: Sequence[s.Arg], method: str, loc: ir.Loc) -> None:
        """Built-in methods without parameters."""
        if arg_trees:
            raise P4Error(f"'{method}' expects 0 arguments, got {len(arg_trees)}", loc)

    def bind_args(
        self,
        params: list[ir.Param],
        arg_trees: Sequence[s.Arg | ir.Expr],
        scope: Scope,
        loc: ir.Loc,
        what: str,
        binding: dict[str, ir.Type],
    ) -> list[ir.Expr | None]:
        """Align arguments with parameters, infer type variables, convert and check them."""
        slots = _arg_slots(params, arg_trees, loc, what)
        values = self.infer_type_vars(params, slots, scope, binding, what)
        return [
            self.bind_arg(p, substitute(p.type, binding), e, slot.loc
                          if isinstance(slot, s.Expr) else loc, what)
            for p, slot, e in zip(params, slots, values, strict=False)
        ]

    def infer_type_vars(
        self,
        params: list[ir.Param],
        slots: list[s.Expr | ir.Expr],
        scope: Scope,
        binding: dict[str, ir.Type],
        what: str,
    ) -> list[ir.Expr]:
        """Evaluate the arguments, learning type variables from those with a known type
        into ``binding``; a type variable only an unsized integer would give fails."""
        values: list[ir.Expr] = []
        for p, slot in zip(params, slots, strict=False):
            if isinstance(slot, ir.Expr):
                values.append(slot)
                continue
            assert isinstance(slot, s.Expr)
            hint = substitute(p.type, binding)
            e = self.expr(slot, scope, None if has_typevar(hint) else hint)
            values.append(e)
            if not isinstance(e.type, (ir.IntLitType, ir.DontCareType)) and not isinstance(
                e, ir.InvalidHeader
            ):
                bind(p.type, e.type, binding)
        for p, e in zip(params, values, strict=False):
            if (
                isinstance(p.type, TypeVar)
                and p.type.name not in binding
                and isinstance(e.type, ir.IntLitType)
            ):
                # p4c: an integer without a width cannot give a type variable its type
                raise P4Error(
                    f"{what}: could not infer a width for the argument of '{p.name}'", e.loc
                )
        return values

    def bind_arg(
        self, p: ir.Param, ptype: ir.Type, e: ir.Expr, aloc: ir.Loc, what: str
    ) -> ir.Expr | None:
        """One argument checked against its parameter (of type ``ptype``, type variables
        substituted): converted for an in parameter, None for ``_`` to an out one."""
        if p.direction and isinstance(ir.strip_newtype(ptype), ir.StringType):
            raise P4Error(
                f"{what}: parameter '{p.name}' of type string cannot have a direction", aloc
            )
        if isinstance(e, ir.DontCare) and has_typevar(ptype):
            raise P4Error(
                f"{what}: could not infer a type for parameter '{p.name}' from '_'", aloc
            )
        if p.direction in ("out", "inout"):
            return self.bind_out_arg(p, ptype, e, aloc, what)
        if isinstance(e, ir.DontCare):
            raise P4Error(
                f"{what}: '_' can only be passed to an out parameter, not to '{p.name}'",
                aloc,
            )
        try:
            return self.convert(e, ptype, aloc, what)
        except P4Error:
            raise _mismatch(what, e, p, ptype, aloc) from None

    def bind_out_arg(
        self, p: ir.Param, ptype: ir.Type, e: ir.Expr, aloc: ir.Loc, what: str
    ) -> ir.Expr | None:
        """An out/inout argument: assignable and of the parameter's type, not converted;
        ``_`` (None) only for out."""
        if isinstance(e, ir.DontCare):
            if p.direction == "inout":
                raise P4Error(f"{what}: '_' cannot be passed to inout parameter '{p.name}'", aloc)
            return None
        try:
            self.check_lvalue(e, aloc)
        except P4Error:
            raise P4Error(
                f"{what}: the argument for {p.direction} parameter '{p.name}' must be "
                "assignable",
                aloc,
            ) from None
        if not has_typevar(ptype) and not same_type(e.type, ptype):
            raise _mismatch(what, e, p, ptype, aloc)
        return e


def _mismatch(what: str, e: ir.Expr, p: ir.Param, ptype: ir.Type, aloc: ir.Loc) -> P4Error:
    return P4Error(
        f"{what}: argument of type {type_str(e.type)} does not match parameter "
        f"'{p.name}' of type {type_str(ptype)}",
        aloc,
    )


def _arg_slots(
    params: list[ir.Param], arg_trees: Sequence[s.Arg | ir.Expr], loc: ir.Loc, what: str
) -> list[s.Expr | ir.Expr]:
    """The argument for each parameter: positional ones first, then named ones, then the
    parameters' defaults; too many, unknown, doubled or missing arguments fail."""
    positional, named = _split_args(arg_trees, what)
    given = len(positional) + len(named)
    if given > len(params):
        raise P4Error(f"{what}: expected {len(params)} arguments, got {given}", loc)
    names = {p.name for p in params}
    for n in named:
        if n not in names:
            raise P4Error(f"{what}: no parameter named '{n}'", loc)
    slots: list[s.Expr | ir.Expr] = []
    for i, p in enumerate(params):
        if i < len(positional):
            if p.name in named:
                raise P4Error(f"{what}: parameter '{p.name}' given twice", loc)
            slots.append(positional[i])
        elif p.name in named:
            slots.append(named[p.name])
        elif p.default is not None:
            slots.append(p.default)
        else:
            raise P4Error(f"{what}: expected {len(params)} arguments, got {given}", loc)
    return slots


def _split_args(
    arg_trees: Sequence[s.Arg | ir.Expr], what: str
) -> tuple[list[s.Expr | ir.Expr], dict[str, s.Expr]]:
    """Positional and named arguments; no positional one may follow a named one."""
    positional: list[s.Expr | ir.Expr] = []
    named: dict[str, s.Expr] = {}
    for a in arg_trees:
        if isinstance(a, s.NamedArg):
            named[a.name] = a.value
        else:
            if named:
                raise P4Error(f"{what}: positional argument after named arguments", a.loc)
            positional.append(a)
    return positional, named


def _check_same_newtype(e: ir.Expr, t: ir.Type, loc: ir.Loc, what: str) -> None:
    """Same underlying type, but a 'type' declares a distinct one: a cast is needed
    (constants stay convertible: a folded cast (N)5 has lost its 'type', lenient)."""
    if _newtype_name(e.type) != _newtype_name(t) and not isinstance(e, (ir.Const, ir.BoolConst)):
        raise P4Error(
            f"{what}: an expression of type {type_str(e.type)} needs an explicit cast to "
            f"{type_str(t)} ('type' declares a distinct type)",
            loc,
        )


def _operand_kind(operand: ir.Expr) -> str | None:
    """What an operand is when no operator applies to it (None: a value)."""
    ot = ir.strip_newtype(operand.type)
    if isinstance(ot, ir.TableApplyResultType):
        return "a table application result"
    if isinstance(ot, ir.ActionRunType):
        return "action_run (only allowed as a switch subject)"
    if isinstance(operand, ir.InstanceRef):
        return "a table or instance"
    if isinstance(ot, (ir.VoidType, ir.ExternType, ir.BlockType)):
        return "a value of type " + type_str(operand.type)
    return None


def _check_operands(op: str, left: ir.Expr, right: ir.Expr, loc: ir.Loc) -> None:
    """No operator applies to tables, instances, externs or void; only ==, != and shifts
    to a 'type' (a distinct type) without a cast."""
    for operand in (left, right):
        what = _operand_kind(operand)
        if what is not None:
            raise P4Error(f"'{op}' cannot be applied to {what}", loc)
    if op in ("==", "!=", "<<", ">>"):
        return
    for operand in (left, right):
        if isinstance(operand.type, ir.NewType):
            # p4c: a 'type' is a distinct type; only == and != apply without a cast
            raise P4Error(
                f"'{op}' cannot be applied to a value of type {type_str(operand.type)} "
                "('type' declares a distinct type: cast it to "
                f"{type_str(ir.strip_newtype(operand.type))} first)",
                operand.loc,
            )


def _compare(op: str, left: ir.Expr, right: ir.Expr, loc: ir.Loc) -> ir.Expr:
    """A comparison of unified operands (ordering only on numbers), folded when both are
    constants."""
    t = ir.strip_newtype(left.type)
    if op not in ("==", "!=") and not isinstance(t, (ir.BitType, ir.IntLitType)):
        raise P4Error(f"'{op}' cannot compare operands of type {type_str(left.type)}", loc)
    if isinstance(left, (ir.Const, ir.BoolConst)) and isinstance(right, (ir.Const, ir.BoolConst)):
        return fold_binary(op, left, right, loc)
    return ir.Binary(ir.BoolType(), loc, op, left, right)
