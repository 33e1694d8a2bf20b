"""Skills: SKILL.md documents per tenant (global or per agent), skill_search, use_skill,
publish_skill and the loading rules."""
