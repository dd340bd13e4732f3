"""The primitive dataflow IR: kinds, nodes, graphs, ops, builders and cached templates."""

from accel.ir.build import GraphBuilder
from accel.ir.errors import CycleError, GraphError, MissingInput, PassError
from accel.ir.graph import Graph, ref
from accel.ir.kinds import BATCHABLE_KINDS, ENGINE_KINDS, ITEMWISE_KINDS, LOCAL_KINDS, Kind
from accel.ir.node import Derived, EngineOp, LocalOp, Node, Op, Ref, Role, StreamOp
from accel.ir.ops import (
    CallOp,
    ConstOp,
    DecodeOp,
    GatherOp,
    ItemsOp,
    PickOp,
    PromptOp,
    SliceOp,
    Slot,
    StreamDecodeOp,
    WarmupOp,
    warmed_ids,
)
from accel.ir.schedule import Schedule, Streams
from accel.ir.template import GraphInstance, Template, TemplateCache, config_key

__all__ = [
    "BATCHABLE_KINDS",
    "ENGINE_KINDS",
    "ITEMWISE_KINDS",
    "LOCAL_KINDS",
    "CallOp",
    "ConstOp",
    "CycleError",
    "DecodeOp",
    "EngineOp",
    "GatherOp",
    "Graph",
    "GraphBuilder",
    "GraphError",
    "GraphInstance",
    "ItemsOp",
    "Kind",
    "LocalOp",
    "MissingInput",
    "Derived",
    "Node",
    "Role",
    "Schedule",
    "Streams",
    "Op",
    "PassError",
    "PickOp",
    "PromptOp",
    "Ref",
    "SliceOp",
    "Slot",
    "StreamDecodeOp",
    "StreamOp",
    "Template",
    "TemplateCache",
    "WarmupOp",
    "warmed_ids",
    "config_key",
    "ref",
]
