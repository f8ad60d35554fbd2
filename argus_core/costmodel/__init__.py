"""The cost model's calibration: fitted corrections of the roofline-occupancy model
(`argus_core.evaluate.costmodel`) on recorded measurements (`fit`), per target."""
