"""Naming what an optimizer trains from its parameters' names."""

from __future__ import annotations

from tvis_tui.store.model_parts import common_part, told_apart


def test_the_part_parameter_names_share_is_what_an_optimizer_trains():
    assert common_part(["Net.critic.0.weight", "Net.critic.2.bias"]) == "Net.critic"
    assert common_part(["Generator.main.0.weight", "Generator.main.3.weight"]) == "Generator.main"
    assert common_part(["Critic.weight", "Critic.bias"]) == "Critic"
    assert common_part(["Net.fc.weight", "Other.fc.weight"]) is None  # two models
    assert common_part(["param[0]"]) is None and common_part([]) is None


def test_parts_are_named_by_their_model_where_that_tells_them_apart():
    assert told_apart(["Discriminator.main", "Generator.main"]) == {
        "Discriminator.main": "Discriminator", "Generator.main": "Generator"}
    assert told_apart(["agent.actor", "agent.critic"]) == {"agent.actor": "agent.actor",
                                                           "agent.critic": "agent.critic"}
