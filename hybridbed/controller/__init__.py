"""The SDN controller of the emulated fabric (os-ken), split as Faucet splits valve logic from OpenFlow
plumbing: which circuits to light (`circuits.py`: the demand matrix, max-weight matching, steering changes;
the simulator uses it too), which flow entries each switch holds (`rules.py`), the app that sends them and
carries out an OCS reconfiguration (`fabric_app.py`: `reconfigure`), its REST API and client, and the one OCS
event type (`events.py`) the controller, the simulator and the results share. Imports only `config`."""
