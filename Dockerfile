# Node Maintenance Operator image: wheels (ours and our dependencies) built in one stage, installed
# offline into a slim runtime stage that has no compiler and no source tree.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ARG VERSION=0.3.0
LABEL org.opencontainers.image.title="node-maintenance-operator" \
      org.opencontainers.image.description="Cordons, taints and drains a node for each NodeMaintenance" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "node-maintenance-operator==${VERSION}" && rm -rf /wheels
# A numeric non-root user, so runAsNonRoot can verify it without a passwd entry.
USER 65532:65532
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
EXPOSE 9443 8081
ENTRYPOINT ["python", "-m", "node_maintenance"]
