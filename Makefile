.PHONY: up down test lint bench
SHELL := /bin/bash

up:     ## Bring the portal and its local GPU cluster up; prints the URL and demo logins
	./scripts/up.sh

down:   ## Stop the portal and the local cluster (state is kept)
	./scripts/down.sh

test:   ## Install what the tests need, start the local cluster, run ruff and the whole suite
	./scripts/test.sh

lint:
	ruff check .
