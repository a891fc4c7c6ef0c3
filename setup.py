"""Packaging beyond pyproject.toml: the Alembic scripts ship inside the package.

`migrations/` at the top of the checkout stays the source; the wheel carries it as the
package `agentd.store.migrations`, so an installed `agentd migrate`/`serve` finds it
(agentd/store/db.py looks there first, then in the checkout).
"""

from setuptools import find_namespace_packages, setup

setup(
    packages=[
        *find_namespace_packages(include=["agentd*"]),
        "agentd.store.migrations",
        "agentd.store.migrations.versions",
    ],
    package_dir={"agentd.store.migrations": "migrations"},
)
