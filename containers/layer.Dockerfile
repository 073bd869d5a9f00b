# A system's own layer on the lockbreaker node image: the Debian packages only that
# system's nodes run (etcd, PostgreSQL) and a script that readies them. Built by
# containers.EnsureSystemImage, which passes BASE (the node image, whose apt sources
# already name the mirror), PACKAGES and PREPARE (the system descriptor's Image).
ARG BASE
FROM ${BASE}
ARG PACKAGES
ARG PREPARE=true
RUN set -eu; \
    apt-get update -q; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ${PACKAGES}; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*
RUN sh -eu -c "${PREPARE}"
