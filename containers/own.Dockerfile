# A system file's own layer on the lockbreaker node image (package sysfile): its Debian
# packages, if any, the files copied from the user's machine (files/, at their paths), and
# its prepare script. Built by containers.ensureOwnImage, which passes BASE (the node
# image), PACKAGES and PREPARE.
ARG BASE
FROM ${BASE}
ARG PACKAGES=
ARG PREPARE=true
RUN set -eu; \
    if [ -n "${PACKAGES}" ]; then \
        apt-get update -q; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ${PACKAGES}; \
        apt-get clean; \
        rm -rf /var/lib/apt/lists/*; \
    fi
COPY files/ /
RUN sh -eu -c "${PREPARE}"
LABEL org.lockbreaker.project=1
