"""A device function in a module of its own: diagnostics of its lines must name this file."""

from tenferro_host import kernel as K


@K.func
def halve_then_sync(s, u):
    s[u] = s[u] * 0.5
    K.sync_cube()  # MARK remote-barrier
