"""What planners share: the action space over policies and KB techniques (`actions`), and
the policy space derived from the target's spec and the problem's shape (`space`).

Planner plugins import it from here, never from each other (`argus_plugins.planners.icrl`
and `argus_plugins.planners.search` propose from the same space)."""
