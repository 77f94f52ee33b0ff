"""`planner fleet --k8s`: the winner as Kubernetes manifests (a Deployment of one engine
instance a pod; a LeaderWorkerSet where one instance spans hosts; for an SGLang xPyD winner a
StatefulSet per pool, the router and their Services), from its launch lines and layout."""

from typing import Any

from planner.core.hosts import HEAD_ADDR, NODE_RANK_PLACEHOLDER, Span, span

# Where each engine's OpenAI server listens by default (vLLM serve: 8000; SGLang
# launch_server: 30000, on 127.0.0.1 unless --host says otherwise) and its health endpoint.
ENGINE_PORTS = {"vllm": 8000, "sglang": 30000}
HEALTH_PATH = "/health"
# The Secret a manifest reads the Hub token from (key `token`), optional for public models.
HF_TOKEN_SECRET = "hf-token"
# Shared memory for NCCL / RCCL between TP ranks: the engines' docs run their images with
# --ipc=host or a large /dev/shm; 16 GiB as an in-memory emptyDir per replica.
SHM_SIZE = "16Gi"
# A server over hosts runs as a LeaderWorkerSet (kubernetes-sigs/lws, API
# leaderworkerset.x-k8s.io/v1): per replica a group of `size` pods, the leader index 0, each
# container given the leader's address, the group's size and its own index as
# LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX (api/leaderworkerset/v1/
# leaderworkerset_types.go), which Kubernetes substitutes for $(NAME) in a command; the pods
# carry the set's name and their role in labels.
LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"
LWS_WORKER_INDEX = "$(LWS_WORKER_INDEX)"
# vLLM spreads a server over hosts with Ray: every host joins the leader's Ray cluster, and
# `vllm serve` on the leader takes the Ray backend where its ranks outgrow the host's GPUs
# (vllm/config/parallel.py) and waits for all of them to join (executor/ray_utils.py
# _wait_until_pg_ready, up to PG_WAIT_TIMEOUT, 1,800 s). The head listens on Ray's default
# port (`ray start --head`, 6379).
RAY_HEAD_PORT = 6379
# A worker retries joining until the leader's head is up (the pods of a group start together).
RAY_JOIN_RETRY_S = 5
# What the manifests cannot know: the step times price collectives between hosts on each GPU's
# RDMA NIC (planner.core.step.comm), which a pod reaches only through the cluster's RDMA device
# plugin; over the pod network NCCL / RCCL fall back to TCP sockets.
RDMA_NOTE = (
    "the plan prices traffic between hosts on each GPU's RDMA NIC: request the RDMA device "
    "plugin's resources (and NCCL_IB_HCA / host networking as the cluster needs), or NCCL / "
    "RCCL fall back to TCP over the pod network"
)


def _engine_container(
    winner: dict[str, Any], command: str, hosts: int = 1
) -> tuple[dict[str, Any], int]:
    """One engine server's container for a launch line (on each of `hosts` pods): the engine's
    image for the planned release, listening on 0.0.0.0 with its port, a readiness probe on
    its health endpoint, the Hub token from a Secret and the server's GPUs on this host,
    requested by vendor; and its port."""
    import shlex

    from planner.sources.presets import find_gpu

    engine, version = winner["engine"], str(winner.get("engine_version") or "")
    argv = shlex.split(command)
    port = ENGINE_PORTS[engine]
    vendor = find_gpu(winner["gpu"]).vendor
    resource = "amd.com/gpu" if vendor == "amd" else "nvidia.com/gpu"
    serve_args = ["--host", "0.0.0.0", "--port", str(port)]
    if engine == "vllm" and vendor != "amd":
        # vLLM publishes one OpenAI-server image per release, tagged v<version>
        image = f"vllm/vllm-openai:v{version}" if version else "vllm/vllm-openai:latest"
        container: dict[str, Any] = {"name": "vllm", "image": image, **_vllm_argv(argv, serve_args)}
    elif engine == "vllm":
        # ROCm builds are tagged by ROCm and vLLM release together: pick the tag for the
        # planned release (annotation below)
        container = {"name": "vllm", "image": "rocm/vllm:latest", **_vllm_argv(argv, serve_args)}
    else:
        container = {
            "name": "sglang",
            "image": "lmsysorg/sglang:latest",
            "command": argv + serve_args,
        }
    container["ports"] = [{"name": "http", "containerPort": port}]
    container["readinessProbe"] = {
        "httpGet": {"path": HEALTH_PATH, "port": port},
        "initialDelaySeconds": 60,
        "periodSeconds": 10,
        "failureThreshold": 60,  # weights load and graphs capture for minutes on large models
    }
    container["env"] = [
        {
            "name": "HF_TOKEN",
            "valueFrom": {
                "secretKeyRef": {"name": HF_TOKEN_SECRET, "key": "token", "optional": True}
            },
        }
    ]
    container["resources"] = {"limits": {resource: server_span(winner).gpus // hosts}}
    return container, port


def server_span(winner: dict[str, Any]) -> Span:
    """How one server of the winner spreads over hosts: its TP x PP GPUs and vLLM's DP ranks,
    which run in the one server (SGLang's attention groups sit inside TP), over a host's
    (planner.core.hosts)."""
    from planner.core.engines import release
    from planner.sources.presets import find_gpu

    engine = winner["engine"]
    ranks = winner.get("dp", 1) if engine == "vllm" else 1
    version = release(engine, winner.get("engine_version"))
    return span(engine, version, winner["tp"], winner.get("pp", 1), ranks, find_gpu(winner["gpu"]))


def _vllm_argv(argv: list[str], serve_args: list[str]) -> dict[str, list[str]]:
    """A vLLM line in a container: `vllm serve`'s arguments after the image's entrypoint
    (`vllm serve`, planner.sources.deployed), an older release's module line whole."""
    if argv[:2] == ["vllm", "serve"]:
        return {"args": argv[2:] + serve_args}
    return {"command": ["python3", *argv[1:], *serve_args]}  # the images ship python3


def _pod(winner: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """The pod around an engine container: /dev/shm where a server has several ranks (NCCL /
    RCCL between them)."""
    pod: dict[str, Any] = {"containers": [container]}
    if server_span(winner).gpus > 1:
        container["volumeMounts"] = [{"name": "shm", "mountPath": "/dev/shm"}]
        pod["volumes"] = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}}]
    return pod


def k8s_deployment(winner: dict[str, Any], name: str) -> str:
    """A Deployment that serves the winner's line, `replicas` pods of one engine instance."""
    import yaml

    container, _port = _engine_container(winner, winner["command"])
    engine, version = winner["engine"], str(winner.get("engine_version") or "")
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "llm",
            "annotations": {"planner/engine": f"{engine} {version}".strip()},
        },
        "spec": {
            "replicas": winner["replicas"],
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {
                "metadata": {"labels": {"app": "llm", "model": name.replace("/", "-")[:60]}},
                "spec": _pod(winner, container),
            },
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


def k8s_leader_worker_set(winner: dict[str, Any], name: str, span: Span) -> str:
    """A LeaderWorkerSet for a winner whose server spans hosts: per replica a group of one
    pod a host, the leader serving HTTP (a Service in front of the leaders). SGLang runs its
    line on every pod, rank and rendezvous from LWS's variables; vLLM's pods form a Ray cluster
    whose head, the leader, runs the line, or, for data-parallel ranks a host, the leader runs
    the line and each worker the next ranks headless."""
    import copy
    import shlex

    import yaml

    engine, version = winner["engine"], str(winner.get("engine_version") or "")
    command = winner["command"].replace(NODE_RANK_PLACEHOLDER, LWS_WORKER_INDEX)
    command = command.replace(HEAD_ADDR, LWS_LEADER_ADDRESS)  # vLLM's and SGLang's (:port)
    leader, port = _engine_container(winner, command, span.hosts)
    worker = copy.deepcopy(leader)
    for key in ("ports", "readinessProbe"):  # only the leader serves HTTP
        worker.pop(key)
    if engine == "vllm":
        argv = leader.get("command") or ["vllm", "serve", *leader["args"]]
        worker.pop("args", None)
        if span.mode == "dp":
            start = f"$((LWS_WORKER_INDEX * {span.ranks_per_host}))"  # the shell's arithmetic
            headless = f"--headless --data-parallel-start-rank {start}"
            worker["command"] = ["sh", "-c", f"exec {shlex.join(argv)} {headless}"]
        else:
            leader.pop("args", None)
            leader["command"] = [
                "sh",
                "-c",
                f"ray start --head --port={RAY_HEAD_PORT} && exec {shlex.join(argv)}",
            ]
            join = f"ray start --address={LWS_LEADER_ADDRESS}:{RAY_HEAD_PORT} --block"
            worker["command"] = ["sh", "-c", f"until {join}; do sleep {RAY_JOIN_RETRY_S}; done"]
    label = name.replace("/", "-")[:60]
    doc = {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": "llm",
            "annotations": {
                "planner/engine": f"{engine} {version}".strip(),
                "planner/note": RDMA_NOTE,
            },
        },
        "spec": {
            "replicas": winner["replicas"],
            "leaderWorkerTemplate": {
                "size": span.hosts,
                "restartPolicy": "RecreateGroupOnPodRestart",  # a rank lost stops the server
                "leaderTemplate": {
                    "metadata": {"labels": {"role": "leader", "model": label}},
                    "spec": _pod(winner, leader),
                },
                "workerTemplate": {
                    "metadata": {"labels": {"role": "worker", "model": label}},
                    "spec": _pod(winner, worker),
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "llm"},
        "spec": {
            "selector": {LWS_NAME_LABEL: "llm", "role": "leader"},
            "ports": [{"name": "http", "port": port}],
        },
    }
    return yaml.safe_dump_all([doc, service], sort_keys=False)


# SGLang's prefill servers answer the KV bootstrap handshake on this port
# (python/sglang/srt/server_args.py: --disaggregation-bootstrap-port, default 8998) and the
# router listens on its own (sglang_router launch_router --port; 30000 is the engines').
SGLANG_BOOTSTRAP_PORT = 8998
ROUTER_PORT = 8000
# What the manifests cannot know: the Mooncake backend moves KV over RDMA between the pools.
MOONCAKE_NOTE = (
    "Mooncake transfers KV over RDMA: add --disaggregation-ib-device with this cluster's NICs "
    "and request the RDMA device plugin's resources"
)


def k8s_disaggregated(winner: dict[str, Any], name: str) -> str:
    """An SGLang xPyD winner as manifests: a StatefulSet per pool (replicas x instances per
    unit) behind a headless Service, so each instance has the stable name the router and the
    KV bootstrap need (prefill-0.prefill, ...); the router as a Deployment listing every
    instance, and a Service in front of it."""
    import shlex

    import yaml

    pools = winner["pools"]
    label = name.replace("/", "-")[:60]
    engine, version = winner["engine"], str(winner.get("engine_version") or "")
    counts = {
        "prefill": winner["replicas"] * pools["prefill_instances"],
        "decode": winner["replicas"] * pools["decode_instances"],
    }
    docs: list[dict[str, Any]] = []
    urls: dict[str, list[str]] = {}
    image = ""
    for role, count in counts.items():
        container, port = _engine_container(winner, pools[f"{role}_command"])
        image = container["image"]  # the router ships in the engine's own image
        ports = [{"name": "http", "port": port}]
        if role == "prefill":
            ports.append({"name": "bootstrap", "port": SGLANG_BOOTSTRAP_PORT})
            container["ports"].append({"name": "bootstrap", "containerPort": SGLANG_BOOTSTRAP_PORT})
        urls[role] = [f"http://{role}-{i}.{role}:{port}" for i in range(count)]
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": role},
                "spec": {"clusterIP": "None", "selector": {"app": role}, "ports": ports},
            }
        )
        docs.append(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {
                    "name": role,
                    "annotations": {
                        "planner/engine": f"{engine} {version}".strip(),
                        "planner/disagg": f"{winner['disagg']} x {winner['replicas']}",
                        "planner/note": MOONCAKE_NOTE,
                    },
                },
                "spec": {
                    "serviceName": role,
                    "replicas": count,
                    "podManagementPolicy": "Parallel",
                    "selector": {"matchLabels": {"app": role}},
                    "template": {
                        "metadata": {"labels": {"app": role, "model": label}},
                        "spec": _pod(winner, container),
                    },
                },
            }
        )
    router = shlex.split("python -m sglang_router.launch_router --pd-disaggregation")
    for url in urls["prefill"]:
        router += ["--prefill", url, str(SGLANG_BOOTSTRAP_PORT)]
    for url in urls["decode"]:
        router += ["--decode", url]
    router += ["--host", "0.0.0.0", "--port", str(ROUTER_PORT)]
    docs.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "router"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "router"}},
                "template": {
                    "metadata": {"labels": {"app": "router", "model": label}},
                    "spec": {
                        "containers": [
                            {
                                "name": "router",
                                "image": image,
                                "command": router,
                                "ports": [{"name": "http", "containerPort": ROUTER_PORT}],
                            }
                        ]
                    },
                },
            },
        }
    )
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "llm"},
            "spec": {
                "selector": {"app": "router"},
                "ports": [{"name": "http", "port": ROUTER_PORT}],
            },
        }
    )
    return yaml.safe_dump_all(docs, sort_keys=False)
