# File-based catalog of node-maintenance-operator: every release, served over gRPC by opm. Rendered by nmo-pack.
# The opm base image is a build argument so release builds can pin it by digest.
ARG OPM_IMAGE=ghcr.io/node-maintenance-operator/opm:v1.63.0
FROM ${OPM_IMAGE}

ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs"]

COPY catalog /configs
LABEL operators.operatorframework.io.index.configs.v1=/configs
