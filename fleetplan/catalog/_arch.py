"""The architecture rules a model spec keeps, shared by :class:`~fleetplan.catalog.models.ModelSpec`
(``models.csv`` rows) and the ``config.json`` reader (:mod:`fleetplan.catalog.hf_config`), so both
refuse the same models with the same words. Main entry: :func:`model_inconsistency`.
"""

from __future__ import annotations


def model_inconsistency(heads: int, kv_heads: int, hidden: int, experts: int,
                        per_token: int) -> list[tuple[str, str]]:
    """``(field, why)`` for each architecture rule a model breaks: KV heads divide the attention
    heads (grouped-query attention), at least one hidden unit per head, an MoE layer routes each
    token to 1..experts experts. Empty when it breaks none."""
    out = []
    if kv_heads > heads or heads % kv_heads:
        out.append(("kv_heads", f"{kv_heads} must divide the {heads} attention heads "
                    "(grouped-query attention)"))
    if hidden < heads:
        out.append(("hidden_size", f"{hidden} is fewer than the {heads} attention heads"))
    if experts and not 1 <= per_token <= experts:
        out.append(("experts_per_token", f"{per_token} must be 1 to the {experts} experts"))
    if not experts and per_token:
        out.append(("experts_per_token", f"{per_token} with no experts (num_experts 0)"))
    return out
