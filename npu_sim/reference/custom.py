"""Implementations of TOSA CUSTOM operators, registered by (domain, name).

TOSA leaves a CUSTOM operator's behaviour to the implementation: the graph only
names it (``CustomAttribute.domain_name`` / ``operator_name``) and carries opaque
``implementation_attrs`` bytes. The reference executor runs a CUSTOM operator
by looking its (domain, name) up here; an unregistered one is an
:class:`~npu_sim.errors.UnsupportedFeatureError`, never a silent no-op.

An implementation has the kernel signature ``fn(args: KernelArgs) ->
list[np.ndarray]``: ``args.inputs`` are the operator's inputs,
``args.attribute.implementation_attrs`` its bytes and ``args.output_types``
the declared outputs, which the returned arrays must match.
"""

from __future__ import annotations

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.reference.kernel_api import Kernel

_CUSTOM_OPS: dict[tuple[str, str], Kernel] = {}


def register_custom(domain: str, name: str, fn: Kernel, *, replace: bool = False) -> None:
    """Make ``fn`` the implementation of CUSTOM operator ``domain::name``.

    Registering the same (domain, name) twice is an error unless ``replace``.
    """
    key = (str(domain), str(name))
    if key in _CUSTOM_OPS and not replace:
        raise ValueError(f"CUSTOM operator {domain}::{name} is already registered")
    _CUSTOM_OPS[key] = fn


def unregister_custom(domain: str, name: str) -> None:
    """Forget the implementation of ``domain::name`` (no error if absent)."""
    _CUSTOM_OPS.pop((str(domain), str(name)), None)


def custom_implementation(domain: str, name: str) -> Kernel:
    """The registered implementation of ``domain::name``."""
    try:
        return _CUSTOM_OPS[(domain, name)]
    except KeyError:
        raise UnsupportedFeatureError(
            f"CUSTOM operator {domain!r}::{name!r} has no implementation "
            "(register one with npu_sim.reference.custom.register_custom)"
        ) from None


def registered_custom_ops() -> list[tuple[str, str]]:
    """(domain, name) of every registered CUSTOM operator, sorted."""
    return sorted(_CUSTOM_OPS)
