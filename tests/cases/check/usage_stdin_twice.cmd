check - --budget -
