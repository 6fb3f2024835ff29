"""How tvis stops the script once the last step it was asked for (`--steps N`) is done."""


class StopRecording(BaseException):
    """Raised from a hook once the last requested step has returned; the runner catches
    it. A BaseException so that the script's `except Exception` handlers let it pass.
    The calls it leaves open are unfinished, not failed."""
