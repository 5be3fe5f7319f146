"""The approval page (11-approvals-web): approve or refuse pending calls from a phone.

A client of brokerd's admin.sock; `boxmaker approvals serve` runs it.
"""
