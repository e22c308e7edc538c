"""The model boundary: the `ModelClient` protocol, the litellm adapter, offline models.

Importing this package does not import litellm; the adapter loads it on its first call.
"""

from tenxgraph.core.llm.calling import Route
from tenxgraph.core.llm.litellm_client import LiteLLMClient, load_litellm
from tenxgraph.core.llm.models import resolve
from tenxgraph.core.llm.offline import FunctionModel, ModelInfo, TestModel
from tenxgraph.core.llm.request import ModelClient, ModelRequest
from tenxgraph.core.llm.retry import RetryConfig
from tenxgraph.core.llm.wire_in import StreamAssembler, message_from_response, token_usages
from tenxgraph.core.llm.wire_out import to_wire

__all__ = [
    "FunctionModel",
    "LiteLLMClient",
    "ModelClient",
    "ModelInfo",
    "ModelRequest",
    "RetryConfig",
    "Route",
    "StreamAssembler",
    "TestModel",
    "load_litellm",
    "message_from_response",
    "resolve",
    "to_wire",
    "token_usages",
]
