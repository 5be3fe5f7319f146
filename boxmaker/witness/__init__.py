"""The boxmaker witness (10-checkpoints "Witnesses"): cosigns the checkpoints of
the logs it is configured for, following C2SP tlog-witness."""

from ._config import WitnessConfig, load_witness_config
from ._logic import Cosigned, Outcome, decide
from ._serve import serve

__all__ = ["Cosigned", "Outcome", "WitnessConfig", "decide", "load_witness_config", "serve"]
