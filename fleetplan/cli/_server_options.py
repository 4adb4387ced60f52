"""The options that describe a real server (``--gpu``, ``--gpu-count``, ``--tp``, ``--pp``,
``--dp``, ``--nodes``, ``--interconnect``, ``--engine-version``, ``--engine-arg KEY=VALUE``,
``--warm-prefix-cache``),
declared once for ``ingest``, ``validate`` and ``predict`` (and ``bench``'s, which record
what the user states in the result file instead of reading one:
:data:`BenchGpuOpt` ... :data:`BenchEngineArgOpt`), and :func:`server_description`,
which reads them into one :class:`~fleetplan.profiles.server.ServerDescription` (bad values
refused there, one line naming the flag and value)."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetplan.profiles.server import ServerDescription, engine_arg_help, parse_engine_args

# predict has no result file: the sentence names the commands that read one
_FILE = (" ingest, validate: a result file's own statement is read where you give none; a "
         "contradiction refuses the run.")
_GPU = "GPU of the server, any catalog spelling (vLLM's result files never name it)."
_TP = "Tensor-parallel size (vLLM's --tensor-parallel-size)."
_VERSION = "vLLM version the server runs (e.g. 0.8.5)"
GpuOpt = Annotated[str | None, typer.Option("--gpu", help=_GPU + _FILE)]
GpuCountOpt = Annotated[int | None, typer.Option(
    "--gpu-count", help="GPUs per replica (default: the tensor-parallel size)." + _FILE)]
TpOpt = Annotated[int | None, typer.Option("--tp", help=_TP + _FILE)]
PpOpt = Annotated[int | None, typer.Option(
    "--pp", help="Pipeline-parallel size (vLLM's --pipeline-parallel-size): stages of --tp "
    "GPUs, micro-batches in flight (docs/replica-model.md); ingest refuses it (the store keeps "
    "one tensor-parallel group per run)." + _FILE)]
DpOpt = Annotated[int | None, typer.Option(
    "--dp", help="Data-parallel replicas behind the one endpoint (vLLM's "
    "--data-parallel-size, or instances behind a load balancer); --gpu-count is then all "
    "GPUs: --tp x --pp x --dp." + _FILE)]
NodesOpt = Annotated[int | None, typer.Option(
    "--nodes", help="Nodes the server spans (their network: --interconnect); ingest refuses "
    "it." + _FILE)]
InterconnectOpt = Annotated[str | None, typer.Option(
    "--interconnect", help="The network between the nodes, a row of interconnects.csv (e.g. "
    "IB-NDR-400, RoCE-200G, Ethernet-100G; docs/catalogs.md). Default with --nodes above 1: "
    "Ethernet-100G, a named assumption.")]
EngineVersionOpt = Annotated[str | None, typer.Option(
    "--engine-version", help=_VERSION + ": an uncalibrated prediction uses its engine defaults "
    "(docs/engine-defaults.md)." + _FILE)]
EngineArgOpt = Annotated[list[str] | None, typer.Option(
    "--engine-arg", metavar="KEY=VALUE", help=engine_arg_help())]
# bench: what is stated is written into each result, where ingest and validate read it
_RECORDED = " Recorded in each result; not stated: not recorded."
BenchGpuOpt = Annotated[str | None, typer.Option(
    "--gpu", help=_GPU + " Recorded in each result (default: NVML's name, when it reads one).")]
BenchGpuCountOpt = Annotated[int | None, typer.Option(
    "--gpu-count", min=1, help="GPUs of one replica, recorded in each result (default: --tp "
    "if given, else the GPUs NVML measured).")]
BenchTpOpt = Annotated[int | None, typer.Option("--tp", help=_TP + _RECORDED)]
BenchPpOpt = Annotated[int | None, typer.Option(
    "--pp", help="Pipeline-parallel size (vLLM's --pipeline-parallel-size); --gpu-count is "
    "then --tp x --pp (x --dp)." + _RECORDED + " --ingest refuses it (the store keeps one "
    "tensor-parallel group per run): judge the file with fleetplan validate.")]
BenchDpOpt = Annotated[int | None, typer.Option(
    "--dp", help="Data-parallel replicas behind the endpoint (vLLM's --data-parallel-size)."
    + _RECORDED + " --ingest refuses it above 1.")]
BenchNodesOpt = Annotated[int | None, typer.Option(
    "--nodes", help="Nodes the server spans." + _RECORDED + " --ingest refuses it above 1.")]
BenchEngineVersionOpt = Annotated[str | None, typer.Option(
    "--engine-version", help=_VERSION + ". The server's own /version is recorded where it "
    "answers (another version there refuses the run before it is measured), this one where "
    "it does not.")]
BenchEngineArgOpt = Annotated[list[str] | None, typer.Option(
    "--engine-arg", metavar="KEY=VALUE", help=engine_arg_help() + _RECORDED)]
WarmPrefixOpt = Annotated[bool, typer.Option(
    "--warm-prefix-cache", help="The run's prompts were already in vLLM's prefix cache when "
    "it started (a repeat of the same prompts on a running server). Default: cold.")]


def server_description(*, gpu: str | None = None, gpu_count: int | None = None,
                       tp: int | None = None, pp: int | None = None, nodes: int | None = None,
                       engine_version: str | None = None, engine_args: list[str] | None = None,
                       warm_prefix_cache: bool = False, dp: int | None = None,
                       interconnect: str | None = None) -> ServerDescription:
    """The server the options describe (nothing stated: an empty description)."""
    return ServerDescription(gpu=gpu, gpu_count=gpu_count, tp=tp, pp=pp, nodes=nodes, dp=dp,
                             interconnect=interconnect,
                             engine_version=engine_version,
                             engine_args=parse_engine_args(engine_args),
                             warm_prefix_cache=True if warm_prefix_cache else None)
