"""litellm, imported on first use, set up for tenxgraph: the model client's and the store's
embeddings' (this module sits below both, so that either may load it).
"""

from __future__ import annotations

import gc
import os
from types import ModuleType

from tenxgraph.core import redaction

_litellm: ModuleType | None = None


def load_litellm() -> ModuleType:
    """Import litellm on first use. Its import would otherwise fetch a price list over the
    network (and start a retry thread when that fails), so the bundled one is forced first."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        # likewise its list of Anthropic beta headers (fetched, synchronously, on the first
        # Anthropic call that needs one, e.g. native structured output)
        os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
        import litellm

        litellm.suppress_debug_info = True  # no "Give Feedback" banners on every error
        # litellm and the openai SDK log a provider's error body at DEBUG, key echo included
        redaction.protect_loggers()
        if litellm.disable_hf_tokenizer_download is None:
            # litellm prices every stream as it opens by counting the prompt's tokens; for
            # llama/cohere model names (vLLM, Ollama...) that downloads a tokenizer from the
            # Hugging Face Hub, synchronously on the event loop: offline, the first stream
            # stalls ~23 s in retries. Its tiktoken estimate is enough (we ask for usage).
            litellm.disable_hf_tokenizer_download = True
        if os.environ.get("TENXGRAPH_GC_FREEZE", "1").lower() not in ("0", "false", "no"):
            # litellm's import leaves ~370,000 objects that live as long as the process; every
            # full garbage collection would walk them all (~0.4 s on a small machine, a pause
            # in the middle of some request). Freezing them takes them out of collections.
            gc.collect()
            gc.freeze()
        _litellm = litellm
    return _litellm


__all__ = ["load_litellm"]
