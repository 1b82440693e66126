Recording = None
def load_recording(*a): pass
