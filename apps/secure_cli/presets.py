"""One-click templates for common CLIs (SPEC B §5.4: the five presets of the March release).

A preset fills a new binary's name, deny lists, timeout and tips; the administrator supplies the
credentials (the ``env`` names listed, the ``optional`` ones may be left out) and may override any
other field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EnvVar:
    name: str
    description: str
    optional: bool = False
    file: bool = False  # the value is a path to a file holding the credential


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    env: tuple[EnvVar, ...]
    deny_args: tuple[str, ...]
    deny_verbose: tuple[str, ...]
    timeout_seconds: int
    tips: str

    @property
    def required_env(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.env if not v.optional)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "binary_name": self.name,
            "description": self.description,
            "env": [
                {"name": v.name, "description": v.description, "optional": v.optional, "file": v.file}
                for v in self.env
            ],
            "deny_args": list(self.deny_args),
            "deny_verbose": list(self.deny_verbose),
            "timeout_seconds": self.timeout_seconds,
            "tips": self.tips,
        }


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            "gh",
            "GitHub CLI",
            (EnvVar("GH_TOKEN", "A GitHub token (fine-grained, least privilege)."),),
            (r"auth\s+", r"ssh-key", r"gpg-key", r"repo\s+delete", r"secret\s+"),
            (r"--verbose", r"-v"),
            30,
            "Use --json flag for structured output",
        ),
        Preset(
            "gcloud",
            "Google Cloud CLI",
            (
                EnvVar(
                    "GOOGLE_APPLICATION_CREDENTIALS",
                    "Path of a service account key file on the server.",
                    file=True,
                ),
            ),
            (r"iam\s+", r"auth\s+", r"projects\s+delete", r"services\s+disable", r"kms\s+"),
            (r"--verbosity=debug", r"--log-http"),
            120,
            "Use --format=json for structured output",
        ),
        Preset(
            "aws",
            "AWS CLI",
            (
                EnvVar("AWS_ACCESS_KEY_ID", "The access key id."),
                EnvVar("AWS_SECRET_ACCESS_KEY", "The secret access key."),
                EnvVar("AWS_DEFAULT_REGION", "The default region (eu-west-1 …).", optional=True),
            ),
            (r"iam\s+", r"organizations\s+", r"sts\s+assume", r"ec2\s+terminate"),
            (r"--debug",),
            60,
            "Use --output json for structured output",
        ),
        Preset(
            "kubectl",
            "Kubernetes CLI",
            (EnvVar("KUBECONFIG", "Path of a kubeconfig file on the server.", file=True),),
            (r"delete\s+namespace", r"delete\s+node", r"drain\s+", r"cordon\s+"),
            (),
            60,
            "Use -o json for structured output",
        ),
        Preset(
            "terraform",
            "Terraform CLI",
            (EnvVar("TF_TOKEN_app_terraform_io", "An HCP Terraform API token.", optional=True),),
            (r"destroy", r"force-unlock"),
            (),
            300,
            "Use -json flag for structured output",
        ),
    )
}
