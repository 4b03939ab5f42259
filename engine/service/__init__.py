"""The HTTP service (`precdx serve`): stateless diagnosis of facts or uploaded run folders, and
chat sessions that gather facts over several turns and ask for the next best evidence."""
