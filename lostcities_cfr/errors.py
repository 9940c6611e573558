"""The project's exceptions, in one place.

Every message says what was wrong, with the offending value, and what would be
right, so a researcher can fix a config or a call without reading our code.
"""


class LostCitiesError(Exception):
    """Base class of every error this package raises on purpose."""


class IllegalActionError(LostCitiesError, ValueError):
    """An action that the rules do not allow in the current state.

    The state it was applied to is left unchanged.
    """


class ConfigError(LostCitiesError, ValueError):
    """A configuration value that cannot work; raised before any work starts."""


class AgentSpecError(LostCitiesError, ValueError):
    """An agent spec string (``heuristic:balanced``, ``ckpt:PATH``...) that does not parse."""


class CheckpointError(LostCitiesError, ValueError):
    """A checkpoint file that cannot be used: unreadable, unsafe, or made for another model
    or other rules. The message names the file."""


class NonFiniteError(LostCitiesError, ValueError):
    """A loss or a training row that is NaN or infinite: training stops rather than learn
    from it, and the last checkpoint (written before it) is kept."""


class LostRankError(LostCitiesError, RuntimeError):
    """A rank of a data-parallel run stopped (killed, out of memory, its host gone): the
    others stop too, and the run resumes from its last checkpoint. Exit status 1."""

    exit_code = 1


class ReplayError(LostCitiesError, ValueError):
    """A file of recorded games (``evaluate --record``) that cannot be read or does not
    replay: the message names the file, the line and the field."""


class RequestError(LostCitiesError, ValueError):
    """A request to the ``serve`` page's server that cannot be done (an unknown game, a move
    made at a turn the game has left, a replay step out of range): answered with ``status``
    (a 4xx) and the message, and nothing changes."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
