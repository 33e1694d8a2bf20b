"""The unconditional safeguard (seed 003): what it blocks through chains, wrappers and obfuscation,
what it deliberately lets through, and the write check with symlinks resolved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

from apps.toolkit import safeguard
from apps.toolkit.safeguard import check_shell, check_shell_rule, check_write, check_write_rule

ZW = "\u200b"
DATA = "{data}"  # replaced by settings.DATA_DIR in the tests

BLOCKED: list[tuple[str, str]] = [
    # privilege escalation: every position and wrapper, every spelling
    ("sudo ls", "privilege_escalation"),
    ("sudo -i", "privilege_escalation"),
    ("su", "privilege_escalation"),
    ("su -", "privilege_escalation"),
    ("su root -c id", "privilege_escalation"),
    ("sudoedit /tmp/x", "privilege_escalation"),
    ("doas ls", "privilege_escalation"),
    ("pkexec id", "privilege_escalation"),
    ("/usr/bin/sudo id", "privilege_escalation"),
    ("ls && sudo id", "privilege_escalation"),
    ("ls || sudo id", "privilege_escalation"),
    ("ls; sudo id", "privilege_escalation"),
    ("ls | sudo tee x", "privilege_escalation"),
    ("ls & sudo id", "privilege_escalation"),
    ("ls\nsudo id", "privilege_escalation"),
    ("ls\r\nsudo id", "privilege_escalation"),
    ("echo $(sudo id)", "privilege_escalation"),
    ("echo `sudo id`", "privilege_escalation"),
    ('echo "$(sudo id)"', "privilege_escalation"),
    ("cat <(sudo id)", "privilege_escalation"),
    ("x=${y:-$(sudo id)}", "privilege_escalation"),
    ("env sudo id", "privilege_escalation"),
    ("env FOO=1 sudo id", "privilege_escalation"),
    ("env -i sudo id", "privilege_escalation"),
    ("env -S 'sudo id'", "privilege_escalation"),
    ("nohup sudo id", "privilege_escalation"),
    ("timeout 5 sudo id", "privilege_escalation"),
    ("timeout -s KILL 5 sudo id", "privilege_escalation"),
    ("stdbuf -o0 sudo id", "privilege_escalation"),
    ("nice -n 10 sudo id", "privilege_escalation"),
    ("time sudo id", "privilege_escalation"),
    ("setsid sudo id", "privilege_escalation"),
    ("sh -c 'sudo id'", "privilege_escalation"),
    ('bash -c "sudo id"', "privilege_escalation"),
    ("/bin/bash -lc 'ls && sudo id'", "privilege_escalation"),
    ("env sh -c 'sudo id'", "privilege_escalation"),
    ("sh -c \"sh -c 'sudo id'\"", "privilege_escalation"),
    ("sh <<< 'sudo id'", "privilege_escalation"),
    ("eval 'sudo id'", "privilege_escalation"),
    ("xargs sudo < list", "privilege_escalation"),
    ("find . -exec sudo rm {} \\;", "privilege_escalation"),
    ("busybox su", "privilege_escalation"),
    ("exec sudo id", "privilege_escalation"),
    ("command sudo id", "privilege_escalation"),
    ("(sudo id)", "privilege_escalation"),
    ("{ sudo id; }", "privilege_escalation"),
    ("if true; then sudo id; fi", "privilege_escalation"),
    ("! sudo id", "privilege_escalation"),
    ("FOO=bar sudo id", "privilege_escalation"),
    ("s'u'do id", "privilege_escalation"),
    ('s"u"do id', "privilege_escalation"),
    ("\\sudo id", "privilege_escalation"),
    ("su\\do id", "privilege_escalation"),
    ("$'\\x73udo' id", "privilege_escalation"),
    ("sudo${IFS}id", "privilege_escalation"),
    ("\uff53\uff55\uff44\uff4f id", "privilege_escalation"),  # fullwidth
    (f"su{ZW}do id", "privilege_escalation"),  # zero-width space
    ("su\u202edo id", "privilege_escalation"),  # bidi override
    ("\u0455udo id", "privilege_escalation"),  # Cyrillic dze
    ("{sudo,id}", "privilege_escalation"),  # brace expansion
    ("/usr/bin/su?o id", "privilege_escalation"),  # glob in the program name
    # rm -rf / in all its variants
    ("rm -rf /", "rm_root"),
    ("rm -rf / --no-preserve-root", "rm_root"),
    ("rm -rf --no-preserve-root /", "rm_root"),
    ("rm --no-preserve-root -r /tmp/x", "rm_root"),
    ("rm -fr /", "rm_root"),
    ("rm -r -f /", "rm_root"),
    ("rm --recursive --force /", "rm_root"),
    ("rm -rf //", "rm_root"),
    ("rm -rf /*", "rm_root"),
    ("rm -rf /.", "rm_root"),
    ("rm -rf /..", "rm_root"),
    ('rm -rf "/"', "rm_root"),
    ("cd /tmp && rm -rf /", "rm_root"),
    ("sh -c 'rm -rf /'", "rm_root"),
    ("rm -rf -- /", "rm_root"),
    # writes to devices
    ("dd if=/dev/zero of=/dev/sda", "device_write"),
    ("dd of=/dev/nvme0n1 if=x", "device_write"),
    ("echo x > /dev/sda", "device_write"),
    ("cat img >> /dev/sdb", "device_write"),
    ("echo x | tee /dev/sda", "device_write"),
    ("cp disk.img /dev/sdc", "device_write"),
    ("shred /dev/sda", "device_write"),
    ("echo 1 >/dev/tcp/1.2.3.4/80", "device_write"),
    ("exec 3<>/dev/tcp/evil.example/80", "device_write"),
    ("echo x &> /dev/mem", "device_write"),
    ("printf x 2> /dev/kmsg", "device_write"),
    # disk formatting tools
    ("mkfs /dev/sdb1", "disk_format"),
    ("mkfs.ext4 /dev/sdb1", "disk_format"),
    ("mke2fs /dev/sdb", "disk_format"),
    ("mkswap /dev/sdb2", "disk_format"),
    ("fdisk -l", "disk_format"),
    ("gdisk /dev/sda", "disk_format"),
    ("parted /dev/sda mklabel gpt", "disk_format"),
    ("sfdisk /dev/sda < layout", "disk_format"),
    ("cfdisk", "disk_format"),
    ("wipefs -a /dev/sda", "disk_format"),
    ("sgdisk -Z /dev/sda", "disk_format"),
    ("partprobe", "disk_format"),
    ("diskutil eraseDisk JHFS+ X disk2", "disk_format"),
    ("diskutil apfs deleteContainer disk3", "disk_format"),
    ("format c:", "disk_format"),
    ("timeout 60 mkfs.xfs /dev/sdb", "disk_format"),
    # fork bombs
    (":(){ :|:& };:", "fork_bomb"),
    (":(){ :|: & };:", "fork_bomb"),
    ("bomb() { bomb | bomb & }; bomb", "fork_bomb"),
    ("f(){ f|f& }; f", "fork_bomb"),
    ("function f { f & f & }; f", "fork_bomb"),
    ("perl -e 'fork while fork'", "fork_bomb"),
    ("python3 -c 'import os\nwhile True: os.fork()'", "fork_bomb"),
    # rm/chmod/chown on protected system directories, and shell writes to them
    ("chmod -R 777 /etc", "protected_path"),
    ("chmod 000 /usr/bin/python3", "protected_path"),
    ("chown -R me /usr", "protected_path"),
    ("chgrp staff /etc/shadow", "protected_path"),
    ("rm -rf /etc", "protected_path"),
    ("rm -rf /usr/lib", "protected_path"),
    ("rm /bin/ls", "protected_path"),
    ("rm -rf /boot", "protected_path"),
    ("rm -r /root", "protected_path"),
    ("rm -rf /var/lib/dpkg", "protected_path"),
    ("rm -rf /e*", "protected_path"),
    ("rm -rf /usr/../etc", "protected_path"),
    ("rmdir /sys/x", "protected_path"),
    ("unlink /lib/x", "protected_path"),
    ("echo x > /etc/passwd", "protected_path"),
    ("echo x >> /etc/hosts", "protected_path"),
    ("cp evil /usr/local/bin/ls", "protected_path"),
    ("tee /etc/cron.d/x", "protected_path"),
    ("echo key >> /root/.ssh/authorized_keys", "protected_path"),
    # credential files anywhere
    ("echo x > /home/u/.aws/credentials", "sensitive_path"),
    ("cp c /home/u/.kube/config", "sensitive_path"),
    ("tee /srv/.docker/config.json", "sensitive_path"),
    ("echo x > /home/u/.gnupg/gpg.conf", "sensitive_path"),
    ("echo key >> /home/u/.ssh/authorized_keys", "sensitive_path"),
    # Toolgate's own data directory
    (f"cat {DATA}/secret_key", "data_dir"),
    (f"cp x {DATA}/field_encryption_key", "data_dir"),
    (f"ls {DATA}", "data_dir"),
    (f"echo > {DATA}/pg/postgresql.conf", "data_dir"),
    (f"tar czf out.tgz '{DATA}'", "data_dir"),
    # what cannot be seen is refused
    ('bash -c "bash -c \'bash -c \\"bash -c id\\"\'"', "nesting_too_deep"),
    ("env env env env ls", "nesting_too_deep"),
    ("nohup nice timeout 5 env ls", "nesting_too_deep"),
    ("ls\x00", "invalid"),
]

PASSES: list[str] = [
    "grep -r sudo docs/",  # the word, not the command
    "echo sudo",
    "man sudo",
    "which su",
    "echo su",
    "summit",
    "suspend",
    "sum file.txt",
    "sudoku --help",
    "ls /usr/bin | grep su",
    "rm -rf build/",
    "rm -rf ./node_modules",
    "rm -rf /tmp/work/x",
    "rm notes.md",
    "cat /etc/os-release",
    "ls -la /etc",
    "head -c 16 /dev/urandom | od -x",
    "echo x > /dev/null",
    "make 2>/dev/null",
    "echo x > /dev/stderr",
    "echo x >/dev/stdout",
    "echo x 2>&1",
    "dd if=/dev/zero of=out.img bs=1M count=1",
    "echo format",
    "echo mkfs",
    "grep mkfs notes.txt",
    "chmod +x script.sh",
    "chmod 644 notes.md",
    "chown me notes.md",
    "timeout 5 python x.py",
    "nohup python w.py &",
    "env FOO=1 make",
    "sh -c 'echo hi'",
    "bash -c 'ls && echo ok'",
    "bash -c \"bash -c 'bash -c ls'\"",  # exactly three levels
    "python -c 'import os; print(os.getpid())'",
    "git rm --cached x",
    "find . -name '*.pyc' -delete",
    "find . -exec grep -l x {} +",
    "xargs rm < list",
    "cp a.txt b.txt",
    "tee out.log",
    "echo hi | tee -a out.log",
    "mv a b",
    "ln -s ../x y",
    "systemctl status nginx",
    "init_db",
    "python manage.py migrate",
    "cat <<EOF > notes.md\nhello\nEOF",
    "for f in *.txt; do wc -l $f; done",
]


def _shell_rule(command: str, **where: Path) -> str | None:
    block = check_shell_rule(command, **where)
    return None if block is None else block.rule


def _write_rule(path: Path | str) -> str | None:
    block = check_write_rule(path)
    return None if block is None else block.rule


def _fill(command: str) -> str:
    return command.replace(DATA, str(settings.DATA_DIR))


def test_corpus_sizes():
    assert len(BLOCKED) >= 100
    assert len(PASSES) >= 40


@pytest.mark.parametrize(("command", "rule"), BLOCKED, ids=[f"{r}:{c!r}"[:80] for c, r in BLOCKED])
def test_blocked(command, rule):
    block = check_shell_rule(_fill(command))
    assert block is not None, "not blocked"
    assert block.rule == rule
    message = check_shell(_fill(command))
    assert message is not None
    assert "safeguard" in message
    assert "cannot be approved or configured away" in message


@pytest.mark.parametrize("command", PASSES, ids=[repr(c)[:60] for c in PASSES])
def test_passes(command):
    assert check_shell_rule(command) is None


def test_workspace_home_and_cwd_are_taken_into_account(tmp_path):
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    # ~ is the workspace: its .ssh is a credential directory, its cache is not.
    assert _shell_rule("echo k >> ~/.ssh/authorized_keys", workspace=workspace) == "sensitive_path"
    assert check_shell_rule("rm -rf ~/.cache", workspace=workspace) is None
    # Relative paths resolve against the working directory.
    ups = "../" * (len(workspace.parts) + 3)
    assert _shell_rule(f"rm -rf {ups}", workspace=workspace, cwd=workspace / "sub") == "rm_root"
    assert _shell_rule(f"rm -rf {ups}etc", workspace=workspace) == "protected_path"
    assert check_shell_rule("rm -rf ../sub", workspace=workspace, cwd=workspace / "sub") is None


def test_symlinked_target_of_rm_is_resolved(tmp_path):
    (tmp_path / "etc-link").symlink_to("/etc")
    block = check_shell_rule("chmod -R 777 etc-link/", workspace=tmp_path)
    assert block is not None
    assert block.rule == "protected_path"


def test_data_dir_mention_is_allowed_inside_the_calls_workspace(tmp_path, settings):
    settings.DATA_DIR = tmp_path / "data"
    workspace = tmp_path / "data" / "workspaces" / "t" / "a" / "workspace"
    workspace.mkdir(parents=True)
    assert check_shell_rule(f"cat {workspace}/notes.md", workspace=workspace) is None
    other = tmp_path / "data" / "workspaces" / "t" / "b"
    assert _shell_rule(f"cat {other}/notes.md", workspace=workspace) == "data_dir"
    assert _shell_rule(f"cat {tmp_path}/data/secret_key", workspace=workspace) == "data_dir"
    # A workspace that *is* the data directory exempts nothing.
    assert _shell_rule(f"cat {tmp_path}/data/secret_key", workspace=tmp_path / "data") == "data_dir"


# --- file writes ------------------------------------------------------------------------------------

WRITE_BLOCKED: list[tuple[str, str]] = [
    ("/etc/passwd", "protected_path"),
    ("/etc/cron.d/job", "protected_path"),
    ("/usr/local/bin/tool", "protected_path"),
    ("/usr/lib/x.so", "protected_path"),
    ("/bin/ls", "protected_path"),
    ("/sbin/init", "protected_path"),
    ("/boot/grub/grub.cfg", "protected_path"),
    ("/proc/sys/kernel/x", "protected_path"),
    ("/sys/class/x", "protected_path"),
    ("/dev/sda", "protected_path"),
    ("/root/.bashrc", "protected_path"),
    ("/var/lib/dpkg/status", "protected_path"),
    ("/var/lib/rpm/x", "protected_path"),
    ("/var/lib/apt/lists/x", "protected_path"),
    ("/lib/x", "protected_path"),
    ("/tmp/../etc/hosts", "protected_path"),
    ("/home/u/.ssh/authorized_keys", "sensitive_path"),
    ("/srv/app/.ssh/id_rsa", "sensitive_path"),
    ("/home/u/.gnupg/pubring.kbx", "sensitive_path"),
    ("/home/u/.aws/credentials", "sensitive_path"),
    ("/home/u/.kube/config", "sensitive_path"),
    ("/home/u/.docker/config.json", "sensitive_path"),
    ("{data}/secret_key", "data_dir"),
    ("{data}/field_encryption_key", "data_dir"),
    ("{data}/pg/base/1", "data_dir"),
    ("{data}", "data_dir"),
]


@pytest.mark.parametrize(("path", "rule"), WRITE_BLOCKED, ids=[p for p, _ in WRITE_BLOCKED])
def test_write_blocked(path, rule):
    target = Path(path.replace("{data}", str(settings.DATA_DIR)))
    block = check_write_rule(target)
    assert block is not None
    assert block.rule == rule
    assert check_write(target) == block.message


@pytest.mark.parametrize(
    "path",
    ["/tmp/work/notes.md", "/srv/app/data.json", "/home/u/project/.aws-notes.md", "/var/lib/app/x"],
)
def test_write_allowed(path):
    assert check_write(Path(path)) is None


def test_write_through_a_symlink_is_resolved(tmp_path):
    (tmp_path / "innocent").symlink_to("/etc")
    assert _write_rule(tmp_path / "innocent" / "hosts") == "protected_path"
    (tmp_path / "keys").symlink_to(settings.DATA_DIR)
    assert _write_rule(tmp_path / "keys" / "secret_key") == "data_dir"


def test_workspaces_inside_the_data_dir_stay_writable(tmp_path, settings):
    settings.DATA_DIR = tmp_path / "data"
    settings.TOOLGATE_WORKSPACE_ROOT = tmp_path / "data" / "workspaces"
    workspace = settings.TOOLGATE_WORKSPACE_ROOT / "tenants" / "t" / "agents" / "a" / "workspace"
    workspace.mkdir(parents=True)
    assert check_write(workspace / "notes.md") is None
    assert check_write(workspace / "notes.md", workspace=workspace) is None
    # The system and credential rules still hold inside a workspace.
    assert _write_rule(workspace / ".ssh" / "id_rsa") == "sensitive_path"
    # A symlink in the workspace pointing at the keys does not borrow the exemption.
    (workspace / "k").symlink_to(tmp_path / "data")
    assert _write_rule(workspace / "k" / "secret_key") == "data_dir"
    # Outside the workspaces the data directory is protected.
    assert _write_rule(tmp_path / "data" / "secret_key") == "data_dir"


def test_write_refuses_nul():
    assert _write_rule("/tmp/x\x00y") == "invalid_path"


def test_protected_lists_follow_seed_003():
    for path in ("/bin", "/sbin", "/usr", "/boot", "/etc", "/proc", "/sys", "/dev", "/root"):
        assert path in safeguard.PROTECTED_SYSTEM_PATHS
    for path in ("/var/lib/dpkg", "/var/lib/rpm", "/var/lib/apt"):
        assert path in safeguard.PROTECTED_SYSTEM_PATHS
    assert {"/dev/null", "/dev/stdout", "/dev/stderr"} == safeguard.DEVICE_WRITE_ALLOWED
    assert os.sep == "/"


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ('"$(' * 20000, "nesting_too_deep"),  # would overflow a naive recursive scanner
        ("$(" * 30000, "nesting_too_deep"),
        ("f(){ f " * 8000, None),  # many definitions, no closing brace: no fork bomb, and fast
        ("a{ a| " * 10000, None),
        ("'" * 60000, None),
        ("`" * 60000, None),
    ],
    ids=["dquote-subst", "subst", "definitions", "braces", "quotes", "backticks"],
)
def test_adversarial_input_is_handled_quickly_and_closed(text, rule):
    assert _shell_rule(text) == rule
