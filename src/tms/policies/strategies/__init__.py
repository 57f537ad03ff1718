"""One module per trigger strategy; `tms.policies.registry` names them."""
