#!/usr/bin/env bash
# Placeholder: builds the Kubernetes control-plane binaries (see issue 4).
exit 0
