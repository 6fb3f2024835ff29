"""What an optimizer trains, named from its parameters' names: the part of a model they
share (`Net.critic`), and the shortest names that still tell several such parts apart
(`Generator` and `Discriminator`, not `Generator.main` and `Discriminator.main`). The
recorder names each optimizer step so; the screens label losses and learning rates by it."""

from __future__ import annotations


def common_part(names: list[str]) -> str | None:
    """The part of a model these parameter names share (`Net.critic` for
    `Net.critic.0.weight` and `Net.critic.2.bias`); None where they share no model."""
    parts = [name.split(".")[:-1] for name in names]
    shared: list[str] = []
    for level in zip(*parts) if parts else ():
        if len(set(level)) > 1:
            break
        shared.append(level[0])
    return ".".join(shared) or None


def told_apart(parts: list[str]) -> dict[str, str]:
    """Each of these parts by its model alone where the models tell them apart, else whole."""
    distinct = list(dict.fromkeys(parts))
    roots = {part: part.split(".")[0] for part in distinct}
    return roots if len(set(roots.values())) == len(distinct) else {part: part for part in distinct}
