"""Memory: scratch buffers lifted into planned workspaces (``workspace.py``) and the static memory
planner (``plan.py``: liveness, storage sharing, per-piece bytes) that executors and the fit check read."""
