"""Processes and the claims they hold: workers, the zygote keeper, the OS layer.

Owns worker handles and their phases, the host's end of the zygote, the OS
layer (real and fakeable), the reaper, finding a bundle lock's holders, and
what happens to a claim when its worker exits. A bottom wing: imports
``protocol`` only.
"""
