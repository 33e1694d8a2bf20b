"""The exec sandbox: Docker containers per tenant and scope.

:mod:`apps.runtime.sandbox.config` holds the settings (imported by the runtime settings, so it stays free
of the engine); :mod:`apps.runtime.sandbox.manager` the containers and the runs."""
