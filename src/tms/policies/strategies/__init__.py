"""One module per trigger strategy; `tms.policies.strategy_names` names them."""
