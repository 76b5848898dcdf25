# Node Maintenance Operator image. `nmo-pack images` assembles the same image without a container
# engine (from a Python base it makes from Debian's packages); with docker or podman:
#   docker build --build-arg VERSION=<a release in releases.yaml> -t <registry>/node-maintenance-operator:<VERSION> .
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm
ARG BUILD_IMAGE=${PYTHON_IMAGE}

FROM ${BUILD_IMAGE} AS build
ARG VERSION
WORKDIR /src
COPY pyproject.toml setup.py releases.yaml README.md ./
COPY operator/ operator/
COPY hack/install-app.sh hack/operator-image.lock hack/build-backend.lock hack/
RUN test -n "${VERSION}" || { echo "pass --build-arg VERSION=<a release in releases.yaml>" >&2; exit 2; }; \
    sh hack/install-app.sh "${VERSION}" /opt/node-maintenance-operator

FROM ${PYTHON_IMAGE}
ARG VERSION
LABEL org.opencontainers.image.title="node-maintenance-operator"
LABEL org.opencontainers.image.description="Cordons, taints and drains a node for each NodeMaintenance"
LABEL org.opencontainers.image.version="${VERSION}"
LABEL org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/node-maintenance-operator /opt/node-maintenance-operator
ENV PYTHONPATH=/opt/node-maintenance-operator
ENV PYTHONDONTWRITEBYTECODE=1
ENV PYTHONUNBUFFERED=1
# A numeric non-root user, so runAsNonRoot can verify it without a passwd entry.
USER 65532:65532
EXPOSE 9443/tcp 8081/tcp 8443/tcp
ENTRYPOINT ["python3", "-m", "node_maintenance"]
