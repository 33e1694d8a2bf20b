"""The exec-approval decision: allow, deny, or ask a human (SPEC Part A "Exec approvals", B §6.2).

:func:`check` classifies the command (:mod:`apps.policy.commands`) and decides for **every** simple
command of it with B §6.2's ``CheckCommand`` table, then combines: deny if any command is denied, ask
if any needs asking, allow only when all are allowed.

=====================  ======  =======================================================  ======
security \\ ask         off     on-miss                                                  always
=====================  ======  =======================================================  ======
deny                   deny    deny                                                     deny
allowlist, match       allow   allow                                                    ask
allowlist, no match    deny    ask                                                      ask
full                   allow   allow if matched or a safe bin, else ask                 ask
=====================  ======  =======================================================  ======

"Matched" is per simple command: an ``allowlist`` glob matching the program's basename (only for the
program the call's ``PATH`` finds under that name, so ``./ls`` does not ride on ``ls``), its resolved
path, or that command's own text (assignments before the program included); a command that sets a
variable outside the harmless few (``LD_PRELOAD=x ls``, ``PATH=.``) is matched by its text only, so an
allowlisted ``ls`` does not carry a loader or search-path change; or an active allow-always rule of
this tenant and agent for its resolved binary path and shape. A command that cannot be classified
(NUL byte, nesting too deep) is denied.

Then, in order:

* a command matching the ``package_install`` deny group (when the group is not turned off for the
  agent) asks instead of being denied (unless every command of it is matched, as above, and ask is
  not ``always``), and an approval lets the exec tool run it (:attr:`Verdict.package_install`); a
  match of any other active deny group is denied here already;
* origin ``system`` (heartbeats, cron, recovery) has no one to ask: what would ask is allowed;
* security ``deny`` denies always, whatever the origin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from apps.policy.commands import Classified, classify
from apps.policy.safe_bins import harmful_assignments
from apps.toolkit import shell_deny

if TYPE_CHECKING:
    from apps.policy.engine import Resolved
    from apps.tenants.models import Agent, Tenant

ALLOW, DENY, ASK = "allow", "deny", "ask"
PACKAGE_INSTALL = "package_install"


@dataclass(frozen=True)
class Verdict:
    """What :func:`check` decided, and on which commands."""

    decision: str  # allow | deny | ask
    reason: str
    commands: tuple[Classified, ...] = ()
    asking: tuple[Classified, ...] = ()  # the commands a human must approve
    package_install: bool = False  # an approval (or the system origin) lets the package install run
    approved_groups: frozenset[str] = field(default_factory=frozenset)  # deny groups this verdict lifts

    @property
    def shapes(self) -> list[dict[str, Any]]:
        """Every simple command with its binary path and shape (what allow-always would store)."""
        return [
            {"command": c.text, "binary_path": c.binary_path, "shape": c.shape, "safe": c.safe}
            for c in self.commands
        ]


def _glob_match(command: Classified, allowlist: Iterable[str]) -> bool:
    by_program = not harmful_assignments(command.assignments)
    for glob in allowlist:
        if not isinstance(glob, str) or not glob:
            continue
        if by_program and command.on_path and fnmatchcase(command.name, glob):
            return True
        if by_program and command.binary_path is not None and fnmatchcase(command.binary_path, glob):
            return True
        if fnmatchcase(command.text, glob):
            return True
    return False


def _rule_keys(tenant: Tenant, agent: Agent, commands: Iterable[Classified]) -> set[tuple[str, str]]:
    """(binary path, shape) of the active allow-always rules of ``agent`` for these commands' binaries."""
    from apps.policy.approval_models import ApprovalRule

    paths = {c.binary_path for c in commands if c.binary_path is not None}
    if not paths:
        return set()
    rows = (
        ApprovalRule.objects.for_tenant(tenant)
        .filter(agent_id=agent.pk, revoked_at__isnull=True, binary_path__in=paths)
        .values_list("binary_path", "shape")
    )
    return set(rows)


def _one(command: Classified, security: str, ask: str, listed: bool) -> str:
    """B §6.2's table for one simple command (unknown settings fail closed)."""
    if security == "allowlist":
        if listed:
            return ASK if ask == "always" else ALLOW
        return DENY if ask == "off" else ASK
    if security == "full":
        if ask == "off":
            return ALLOW
        if ask == "on-miss":
            return ALLOW if listed or command.safe else ASK
        return ASK
    return DENY


def check(
    policy: Resolved,
    tenant: Tenant,
    agent: Agent,
    command: str,
    cwd: str,
    origin: str,
    *,
    path_env: str,
) -> Verdict:
    """Decide whether ``agent`` of ``tenant`` may run ``command`` in ``cwd`` (see the module docstring).

    ``path_env`` is the ``PATH`` the command would run with; the rules are read from the database only
    when the table needs them."""
    security, ask = policy.exec_security, policy.exec_ask
    if security == "deny":
        return Verdict(DENY, "exec is denied by this tenant's approval settings (security: deny)")
    classification = classify(command, cwd=cwd, path_env=path_env)
    if classification.invalid:
        return Verdict(DENY, f"command refused: {classification.invalid}")
    commands = classification.commands

    overrides: Mapping[str, Any] = policy.shell_deny_groups
    package_install = False
    if shell_deny.is_group_denied(PACKAGE_INSTALL, overrides) and PACKAGE_INSTALL in shell_deny.denied_groups(
        classification.command, overrides
    ):
        other = shell_deny.check_command(classification.command, {**overrides, PACKAGE_INSTALL: False})
        if other is not None:
            return Verdict(DENY, other.message, commands)
        package_install = True

    listed: dict[int, bool] = {i: _glob_match(c, policy.exec_allowlist) for i, c in enumerate(commands)}
    needs_rules = (
        package_install
        or (security == "allowlist" and ask != "always")
        or (security == "full" and ask == "on-miss")
    )
    unmatched = [c for i, c in enumerate(commands) if not listed[i] and not c.safe]
    if needs_rules and unmatched:
        rules = _rule_keys(tenant, agent, unmatched)
        for i, c in enumerate(commands):
            if not listed[i] and c.binary_path is not None and (c.binary_path, c.shape) in rules:
                listed[i] = True

    outcomes = [_one(c, security, ask, listed[i]) for i, c in enumerate(commands)]
    denied = [c for c, o in zip(commands, outcomes, strict=True) if o == DENY]
    asking = tuple(c for c, o in zip(commands, outcomes, strict=True) if o == ASK)
    if denied:
        return Verdict(
            DENY,
            f"command not allowed by this agent's exec allowlist: {denied[0].text!r} "
            f"(security: {security}, ask: {ask})",
            commands,
        )
    lifted = frozenset({PACKAGE_INSTALL}) if package_install else frozenset()
    if package_install and ask != "always" and all(listed.values()):
        # Every command was approved before (an allow-always rule or the allowlist): no need to ask.
        return Verdict(ALLOW, "allowed: package install approved before", commands, (), True, lifted)
    if not asking and not package_install:
        return Verdict(ALLOW, "allowed", commands)
    if origin == "system":
        reason = "approved automatically: origin system"
        return Verdict(ALLOW, reason, commands, asking, package_install, lifted)
    if asking:
        names = ", ".join(repr(c.text) for c in asking[:5])
        reason = f"approval required for {names} (security: {security}, ask: {ask})"
        if package_install:
            reason += "; it installs or removes packages"
    else:
        reason = "approval required: the command installs or removes packages (deny group package_install)"
        asking = commands
    return Verdict(ASK, reason, commands, asking, package_install, lifted)
