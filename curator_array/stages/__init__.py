"""Built-in stages. Stages know nothing of Ray: the executor adapts them."""

from .base import ProcessingStage, RayStageSpec, Resources, SourceStage
from .partition import FilePartitioningStage

__all__ = ["FilePartitioningStage", "ProcessingStage", "RayStageSpec", "Resources", "SourceStage"]
