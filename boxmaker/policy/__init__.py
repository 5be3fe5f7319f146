"""boxmaker.policy: grant files, decide/redecide, explain, replay, suggest (03-policy).

Pure, apart from reading the grants directory (`_load`).  Its modules are
imported by name (`boxmaker.policy._decide` and so on); the package re-exports
nothing (docs/decisions.md, issue 12: one name for each thing).
"""
