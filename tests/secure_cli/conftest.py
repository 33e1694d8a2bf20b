from __future__ import annotations

import pytest

from tests.jail_support import programs_visible_in_jail

# The fake CLIs (tests/secure_cli/support.py) are written under tmp_path: the jail shows it read-only,
# as an operator lists a directory of installed CLIs in TOOLGATE_JAIL_RO_PATHS.
visible = pytest.fixture(autouse=True)(programs_visible_in_jail)
