def parse_workload(*a): pass
