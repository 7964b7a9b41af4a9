"""A daemon's life in its process: serve until Ctrl-C or SIGTERM, then stop cleanly; a free port."""
import logging
import signal
import socket
import threading

logger = logging.getLogger("gensim_distw2v.io.transport")

__all__ = ["free_port", "serve_member", "serve_until_stopped"]


def free_port(host="127.0.0.1"):
    """A TCP port that is free right now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def serve_member(server, member, ready_message, *args):
    """Serve a worker or a shard until stopped: its ``heartbeat_loop`` starts once ``ready_message``
    (``%`` arguments ``*args``) is logged; on stop ``member.stop()`` says goodbye (which ends the
    heartbeat's long poll at once) and the heartbeat thread gets 5 s to end."""
    beat = threading.Thread(target=member.heartbeat_loop, name="heartbeat", daemon=True)

    def ready():
        logger.info(ready_message, *args)
        beat.start()

    def stop():
        member.stop()
        if beat.is_alive():
            beat.join(timeout=5)

    serve_until_stopped(server, stop, on_ready=ready)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def serve_until_stopped(server, on_stop=None, on_ready=None):
    """Serve until Ctrl-C or SIGTERM, then run ``on_stop`` and unregister (a clean stop either way).

    ``on_ready`` runs first (it logs the "ready" line that supervisors wait on): the SIGTERM handler is
    installed before it, so a SIGTERM sent as soon as that line appears still unregisters the server.
    """
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if on_ready is not None:
            on_ready()
        server.serve()
    except KeyboardInterrupt:
        pass
    finally:
        if on_stop is not None:
            on_stop()
        server.shutdown()
